"""Torch networks built from the manifest's description, so a published state dict loads everywhere.

`Network` is the one trunk every algorithm uses: observations (normalised with frozen statistics when the
manifest has them; images scaled from uint8 to [0, 1] and read channels-first) -> the manifest's encoder -> an
MLP. `PolicyNet` is the published actor: a Network whose last layer matches the manifest's action head, plus the
state-independent `log_std` of a gaussian head. Critics and Q-networks are Networks that are never published, or
(a shared trunk, learner_worker/actor_critic.py) a value head on the actor's last hidden layer.

Image encoders (their shapes and what they fit: shared/policy/manifest.py `encoder_features`):
* cnn: rlfleet's small encoder, 3x3 stride-2 convolutions with ReLU. Its state-dict keys (`conv.<i>.*`) are
  those of policy files written before the other kinds existed, so they still load.
* nature: Mnih et al. 2015, 32x8x8/4, 64x4x4/2, 64x3x3/1, ReLU after each.
* impala: Espeholt et al. 2018, per stage conv3x3 -> max pool 3x3/2 -> two residual blocks, then ReLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)
from torch import nn

from rlfleet.shared.config.base import CnnEncoder, ImpalaEncoder, MlpConfig, MlpEncoder, NatureEncoder
from rlfleet.shared.payloads.spaces import ObsSpace
from rlfleet.shared.policy.actors import head_outputs
from rlfleet.shared.policy.manifest import Encoder, ObsNorm, PolicyManifest, encoder_features, image_dims

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


class Network(nn.Module):
    """obs (+ an optional extra input such as an action, joined after the encoder) -> out_dim outputs."""

    def __init__(self, obs: ObsSpace, encoder: Encoder, net: MlpConfig, out_dim: int, extra_in: int = 0,
                 obs_norm: ObsNorm | None = None) -> None:
        super().__init__()
        self.obs_space = obs
        features = encoder_features(encoder, obs)  # ValueError when the encoder cannot read this observation
        self.image = not isinstance(encoder, MlpEncoder)
        if not isinstance(encoder, MlpEncoder):
            self.conv = image_encoder(encoder, image_dims(obs)[0])
        self.body = mlp(features + extra_in, out_dim, net)
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
        shape = self.obs_space.shape
        self.norm_mean = torch.tensor(norm.mean, dtype=torch.float32, device=device).reshape(shape)
        self.norm_std = torch.sqrt(torch.tensor(norm.var, dtype=torch.float32, device=device).reshape(shape) + 1e-8)
        self.norm_clip = norm.clip

    def _chw(self, obs: torch.Tensor) -> torch.Tensor:
        """Frames -> float32 in [0, 1], channels-first: divided by the image's largest value (255, or 1 for 0/1
        images). One conversion is the only copy: a channels-last batch becomes a permuted view (strides in torch's
        channels_last format, which convolutions read as is)."""
        x = obs.to(torch.float32, copy=True).div_(float(self.obs_space.image_max))
        return x.permute(0, 3, 1, 2) if self.obs_space.channels_last else x

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.image:
            return self.conv(self._chw(obs))
        x = obs.to(torch.float32)
        if self.norm_mean.numel():
            x = ((x - self.norm_mean) / self.norm_std).clamp(-self.norm_clip, self.norm_clip)
        return x.flatten(start_dim=x.ndim - len(self.obs_space.shape))  # any leading batch dims

    def hidden(self, obs: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        """The last hidden layer's activations (the encoder's features when there is no hidden layer): what a
        value head sharing this network's trunk reads."""
        x = self.features(obs)
        if extra is not None:
            x = torch.cat([x, extra], dim=1)
        return self.body[:-1](x)

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
                         head_outputs(manifest.spaces, manifest.head), obs_norm=manifest.obs_norm)
        if manifest.head == "gaussian":
            self.log_std = nn.Parameter(torch.zeros(head_outputs(manifest.spaces, manifest.head)))
