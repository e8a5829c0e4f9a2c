"""Torch networks built from the manifest's description, so a published state dict loads everywhere.

`Network` is the one trunk every algorithm uses: observations (normalised with frozen statistics when the manifest
has them; images scaled from uint8 to [0, 1] and read channels-first) -> the manifest's encoder -> an MLP.
`PolicyNet` is the published actor: a Network whose last layer matches the manifest's action head, plus the
state-independent `log_std` of a gaussian head (gaussian_sde: one per latent feature and action dimension). Critics
and Q-networks are Networks that are never published, or (a shared trunk, learner_worker/actor_critic.py) a value
head on the actor's last hidden layer.

A Dict or Tuple observation holding images (`ObsSpace.image_parts`) gets a multi-input encoder: a CNN of the
encoder's kind per image (`convs.<i>`), its features followed by the other parts' encodings.

Image encoders (their shapes and what they fit: shared/policy/manifest.py `encoder_features`):
* cnn: rlfleet's small encoder, 3x3 stride-2 convolutions with ReLU. Its state-dict keys (`conv.<i>.*`) are
  those of policy files written before the other kinds existed, so they still load.
* nature: Mnih et al. 2015, 32x8x8/4, 64x4x4/2, 64x3x3/1, ReLU after each.
* impala: Espeholt et al. 2018, per stage conv3x3 -> max pool 3x3/2 -> two residual blocks, then ReLU.

A recurrent core (`algo.net.core`, `Core`) sits between the encoder and the MLP, where sb3-contrib's RecurrentPPO puts
its LSTM: encoder features -> GRU/LSTM -> MLP -> head. Such a network reads sequences ([T, B, *obs]) from a state
([B, *state_shape]) with per-row episode starts, at which the state is zeroed before the row (`sequence`); acting is
the one-row case (`step`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)
from torch import nn

from rlfleet.shared.config.base import CnnEncoder, CoreConfig, ImpalaEncoder, MlpConfig, MlpEncoder, NatureEncoder
from rlfleet.shared.payloads.spaces import ObsSpace
from rlfleet.shared.payloads.spaces import image_dims as dims_of
from rlfleet.shared.policy.actors import head_outputs, log_std_shape
from rlfleet.shared.policy.manifest import Encoder, ObsNorm, PolicyManifest, encoder_features, image_dims
from rlfleet.shared.policy.obs_encoding import ObsLayout
from rlfleet.shared.policy.obs_encoding_torch import TorchObsEncoder

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(in_dim: int, out_dim: int, net: MlpConfig) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_dim
    for size in net.hidden:
        layers += [nn.Linear(width, size), ACTIVATIONS[net.activation]()]
        width = size
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))), both convolutions 3x3 with the input's channels and size."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


class ImpalaStage(nn.Module):
    """One stage of the IMPALA ResNet: a 3x3 convolution to `out` channels, a 3x3 stride-2 max pool (padded, so
    height and width halve rounding up) and two residual blocks."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.res0 = ResidualBlock(out_channels)
        self.res1 = ResidualBlock(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res1(self.res0(self.pool(self.conv(x))))


def image_encoder(encoder: CnnEncoder | NatureEncoder | ImpalaEncoder, channels: int) -> nn.Sequential:
    """The convolutional part of an image encoder, ending in a flatten: [B, C, H, W] float -> [B, features]."""
    layers: list[nn.Module] = []
    if isinstance(encoder, NatureEncoder):
        for out, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            layers += [nn.Conv2d(channels, out, kernel, stride=stride), nn.ReLU()]
            channels = out
    elif isinstance(encoder, ImpalaEncoder):
        for out in encoder.channels:
            layers.append(ImpalaStage(channels, out))
            channels = out
        layers.append(nn.ReLU())
    else:
        for out in encoder.channels:
            layers += [nn.Conv2d(channels, out, 3, stride=2, padding=1), nn.ReLU()]
            channels = out
    return nn.Sequential(*layers, nn.Flatten())


def chw(frames: torch.Tensor, image_max: int, channels_last: bool) -> torch.Tensor:
    """[B, *image] frames -> float32 in [0, 1], channels-first: divided by the image's largest value (255, or 1 for
    0/1 images). One conversion is the only copy: a channels-last batch becomes a permuted view (strides in torch's
    channels_last format, which convolutions read as is)."""
    x = frames.to(torch.float32, copy=True).div_(float(image_max))
    return x.permute(0, 3, 1, 2) if channels_last else x


class Core(nn.Module):
    """One GRU or LSTM layer over sequences with episode starts (truncated backprop through time when trained).

    States are [B, *CoreConfig.state_shape] tensors: h for a GRU, h and c stacked on axis 1 for an LSTM. At a row
    whose `starts` flag is set the env's state is zeroed before the row, so one call over a sequence with a reset
    inside equals two calls over its two parts. Runs of rows without any start go through torch's fused layer in
    one call; the sequence is split only where some env starts an episode."""

    def __init__(self, config: CoreConfig, in_dim: int) -> None:
        super().__init__()
        self.config = config
        self.rnn: nn.GRU | nn.LSTM = (nn.GRU if config.kind == "gru" else nn.LSTM)(in_dim, config.hidden)

    def initial(self, batch: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.zeros((batch, *self.config.state_shape), device=device)

    def _run(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(self.rnn, nn.GRU):
            out, h = self.rnn(x, state.unsqueeze(0).contiguous())
            return out, h.squeeze(0)
        out, (h, c) = self.rnn(x, (state[:, 0].unsqueeze(0).contiguous(), state[:, 1].unsqueeze(0).contiguous()))
        return out, torch.stack([h.squeeze(0), c.squeeze(0)], dim=1)

    def forward(self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """x [T, B, in], state [B, *S], starts [T, B] bool (None: no row starts an episode) -> (outputs [T, B, H],
        the state after the last row)."""
        if starts is None:
            return self._run(x, state)
        cuts = [0, *[t for t in torch.nonzero(starts.any(dim=1)).flatten().tolist() if t > 0], len(x)]
        outputs = []
        keep = (~starts).to(x.dtype).reshape(*starts.shape, *([1] * (state.ndim - 1)))
        for begin, end in zip(cuts, cuts[1:], strict=False):
            state = state * keep[begin]
            out, state = self._run(x[begin:end], state)
            outputs.append(out)
        return torch.cat(outputs), state

    def states(self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Like `forward`, also returning the state after every row, [T, B, *S]: what a learner bootstraps from
        where a sequence is cut (the state the env would carry into its next observation). A GRU's output is its
        state, so its rows run fused as in `forward`; an LSTM's cell state is no output, so it steps row by row
        (a 64-unit GRU over 64 rows of 32 sequences without starts, one CPU thread: 7.3 ms row by row, 2.8 ms fused)."""
        if isinstance(self.rnn, nn.GRU):
            fused, _ = self.forward(x, state, starts)
            return fused, fused
        outputs, after = [], []
        keep = (~starts).to(x.dtype).reshape(*starts.shape, *([1] * (state.ndim - 1)))
        for t in range(len(x)):
            out, state = self._run(x[t:t + 1], state * keep[t])
            outputs.append(out)
            after.append(state)
        return torch.cat(outputs), torch.stack(after)


class Network(nn.Module):
    """obs (+ an optional extra input such as an action, joined after the encoder) -> out_dim outputs."""

    def __init__(self, obs: ObsSpace, encoder: Encoder, net: MlpConfig, out_dim: int, extra_in: int = 0,
                 obs_norm: ObsNorm | None = None, core: CoreConfig | None = None) -> None:
        super().__init__()
        self.obs_space = obs
        features = encoder_features(encoder, obs)  # ValueError when the encoder cannot read this observation
        layout = ObsLayout.of(obs)
        self.encoding = None if layout is None else TorchObsEncoder(layout)  # one-hot / binary parts
        self.image = obs.image and not isinstance(encoder, MlpEncoder)
        if obs.image and not isinstance(encoder, MlpEncoder):
            self.conv = image_encoder(encoder, image_dims(obs)[0])
        self.image_parts = obs.image_parts  # only with a convolutional encoder: encoder_features refuses mlp
        if self.image_parts:
            assert not isinstance(encoder, MlpEncoder)
            self.convs = nn.ModuleList(image_encoder(encoder, dims_of(part.shape)[0]) for _, part in self.image_parts)
        self.core: Core | None = None
        if core is not None:
            self.core = Core(core, features + extra_in)
        self.body = mlp(features + extra_in if core is None else core.hidden, out_dim, net)
        self.register_buffer("norm_mean", torch.zeros(0), persistent=False)
        self.register_buffer("norm_std", torch.zeros(0), persistent=False)
        self.norm_clip = 0.0
        self.set_obs_norm(obs_norm)

    def set_obs_norm(self, norm: ObsNorm | None) -> None:
        """Frozen statistics (not part of the state dict: they travel in the manifest)."""
        device = next(self.parameters()).device  # the statistics live where the weights do
        if norm is None:
            self.norm_mean, self.norm_std = torch.zeros(0, device=device), torch.zeros(0, device=device)
            return
        shape = self.obs_space.norm_shape
        self.norm_mean = torch.tensor(norm.mean, dtype=torch.float32, device=device).reshape(shape)
        self.norm_std = torch.sqrt(torch.tensor(norm.var, dtype=torch.float32, device=device).reshape(shape) + 1e-8)
        self.norm_clip = norm.clip

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.image:
            return self.conv(chw(obs, self.obs_space.image_max, self.obs_space.channels_last))
        if self.image_parts:
            return self.multi_input(obs)
        if self.encoding is not None:
            return self.encoding(obs, self.norm_mean, self.norm_std, self.norm_clip)
        x = obs.to(torch.float32)
        if self.norm_mean.numel():
            x = ((x - self.norm_mean) / self.norm_std).clamp(-self.norm_clip, self.norm_clip)
        return x.flatten(start_dim=x.ndim - len(self.obs_space.shape))  # any leading batch dims

    def multi_input(self, obs: torch.Tensor) -> torch.Tensor:
        """[*lead, raw] observations holding images -> each image's CNN features, then the other parts' encodings
        ([*lead, features]), as Stable-Baselines3's CombinedExtractor joins a MultiInputPolicy's keys. Batch sizes
        are never written as numbers (-1 instead), so a traced export takes any batch."""
        x = obs.reshape(-1, obs.shape[-1])
        features = []
        for (start, part), conv in zip(self.image_parts, self.convs, strict=True):
            pixels = x[:, start:start + part.size].reshape(-1, *part.shape)
            features.append(conv(chw(pixels, part.image_max, part.channels_last)))
        assert self.encoding is not None  # an observation with image parts has parts
        features.append(self.encoding(x, self.norm_mean, self.norm_std, self.norm_clip))
        joined = torch.cat(features, dim=1)
        return joined if obs.dim() == 2 else joined.reshape(*obs.shape[:-1], -1)

    def hidden(self, obs: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        """The last hidden layer's activations (the encoder's features when there is no hidden layer): what a
        value head sharing this network's trunk reads. A network with a core reads sequences instead
        (`sequence_hidden`)."""
        if self.core is not None:
            raise TypeError("a network with a recurrent core reads sequences from a state: call sequence_hidden")
        x = self.features(obs)
        if extra is not None:
            x = torch.cat([x, extra], dim=1)
        return self.body[:-1](x)

    def core_input(self, obs: torch.Tensor) -> torch.Tensor:
        """[T, B, *obs] -> the core's input [T, B, features], the encoder run once over all T * B rows."""
        steps, batch = obs.shape[:2]
        x = self.features(obs.reshape(steps * batch, *obs.shape[2:]))
        return x.reshape(steps, batch, x.shape[-1])  # B may be 0: a learner-group rank with no part of a minibatch

    def sequence_hidden(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """[T, B, *obs] from state [B, *S] with episode starts [T, B] -> (last hidden layer [T, B, width], the
        state after the last row)."""
        assert self.core is not None, "sequence_hidden needs a network with a recurrent core"
        out, state = self.core(self.core_input(obs), state, starts)
        return self.body[:-1](out), state

    def step(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One row for B envs: obs [B, *obs], state [B, *S] -> (outputs [B, out], the state after it)."""
        hidden, state = self.sequence_hidden(obs.unsqueeze(0), state)
        return self.head(hidden[0]), state

    @property
    def hidden_width(self) -> int:
        last = self.body[-1]
        assert isinstance(last, nn.Linear)
        return last.in_features

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The last layer on `hidden`'s activations."""
        return self.body[-1](hidden)

    def forward(self, obs: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.hidden(obs, extra))


class PolicyNet(Network):
    def __init__(self, manifest: PolicyManifest) -> None:
        super().__init__(manifest.spaces.obs, manifest.encoder, manifest.net,
                         head_outputs(manifest.spaces, manifest.head), obs_norm=manifest.obs_norm, core=manifest.core)
        std_shape = log_std_shape(manifest.spaces, manifest.head, self.hidden_width)
        if std_shape is not None:
            self.log_std = nn.Parameter(torch.zeros(std_shape))
        self.sde = manifest.head == "gaussian_sde"

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The last layer on `hidden`'s activations; a gaussian_sde head's output adds those activations (its
        latent) after the means."""
        out = self.body[-1](hidden)
        return torch.cat([out, hidden], dim=-1) if self.sde else out
