"""Torch networks built from the manifest's description, so a published state dict loads everywhere.

`Network` is the one trunk every algorithm uses: observations (normalised with frozen statistics when the
manifest has them; images scaled from uint8 to [0, 1] and put channels-first) -> an optional CNN -> an MLP.
`PolicyNet` is the published actor: a Network whose last layer matches the manifest's action head, plus the
state-independent `log_std` of a gaussian head. Critics and Q-networks are Networks that are never published.
"""

from __future__ import annotations

import torch
from torch import nn

from shared.config.base import NetConfig
from shared.payloads.spaces import ObsSpace
from shared.policy.actors import head_outputs
from shared.policy.manifest import CnnEncoder, Encoder, ObsNorm, PolicyManifest

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(in_dim: int, out_dim: int, net: NetConfig) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_dim
    for size in net.hidden:
        layers += [nn.Linear(width, size), ACTIVATIONS[net.activation]()]
        width = size
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class Network(nn.Module):
    """obs (+ an optional extra input such as an action, joined after the encoder) -> out_dim outputs."""

    def __init__(self, obs: ObsSpace, encoder: Encoder, net: NetConfig, out_dim: int, extra_in: int = 0,
                 obs_norm: ObsNorm | None = None) -> None:
        super().__init__()
        self.obs_space = obs
        self.image = isinstance(encoder, CnnEncoder)
        if isinstance(encoder, CnnEncoder):
            if not obs.image:
                raise ValueError(f"a CNN encoder needs uint8 image observations, got {obs.dtype}{list(obs.shape)}")
            channels = obs.shape[-1] if obs.channels_last else obs.shape[0]
            layers: list[nn.Module] = []
            for width in encoder.channels:
                layers += [nn.Conv2d(channels, width, 3, stride=2, padding=1), nn.ReLU()]
                channels = width
            self.conv = nn.Sequential(*layers, nn.Flatten())
            with torch.no_grad():
                features = self.conv(self._chw(torch.zeros((1, *obs.shape), dtype=torch.uint8))).shape[1]
        else:
            features = obs.flat_size
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
        x = obs.to(torch.float32) / float(self.obs_space.image_max)  # 0/1 images stay 0/1
        return x.permute(0, 3, 1, 2) if self.obs_space.channels_last else x

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.image:
            return self.conv(self._chw(obs))
        x = obs.to(torch.float32)
        if self.norm_mean.numel():
            x = ((x - self.norm_mean) / self.norm_std).clamp(-self.norm_clip, self.norm_clip)
        return x.flatten(start_dim=x.ndim - len(self.obs_space.shape))  # any leading batch dims

    def forward(self, obs: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        x = self.features(obs)
        if extra is not None:
            x = torch.cat([x, extra], dim=1)
        return self.body(x)


class PolicyNet(Network):
    def __init__(self, manifest: PolicyManifest) -> None:
        super().__init__(manifest.spaces.obs, manifest.encoder, manifest.net,
                         head_outputs(manifest.spaces, manifest.head), obs_norm=manifest.obs_norm)
        if manifest.head == "gaussian":
            self.log_std = nn.Parameter(torch.zeros(head_outputs(manifest.spaces, manifest.head)))
