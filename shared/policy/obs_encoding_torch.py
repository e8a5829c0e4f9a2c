"""The learner's side of the observation encoding (shared/policy/obs_encoding.py): the same one-hot / binary /
normalised-box encoding in torch, from the same `ObsLayout`, batched over any leading axes.

Its index tensors are non-persistent buffers: they follow the network to its device but stay out of the state
dict, so a policy file holds the weights alone and the manifest's `spaces.obs.parts` say how to encode."""

from __future__ import annotations

import torch
from torch import nn

from rlfleet.shared.policy.obs_encoding import LAYOUT_ARRAYS, ObsLayout


class TorchObsEncoder(nn.Module):
    box_src: torch.Tensor
    box_dst: torch.Tensor
    binary_src: torch.Tensor
    binary_dst: torch.Tensor
    categorical_src: torch.Tensor
    categorical_shift: torch.Tensor
    categorical_low: torch.Tensor
    categorical_high: torch.Tensor

    def __init__(self, layout: ObsLayout) -> None:
        super().__init__()
        self.raw, self.width = layout.raw, layout.width
        for name in LAYOUT_ARRAYS:
            self.register_buffer(name, torch.as_tensor(getattr(layout, name)), persistent=False)

    def forward(self, obs: torch.Tensor, norm_mean: torch.Tensor, norm_std: torch.Tensor,
                clip: float) -> torch.Tensor:
        """[*lead, raw] -> [*lead, width] float32; normalised box values where norm_mean has any."""
        lead = obs.shape[:-1]
        x = obs.reshape(-1, self.raw)
        out = torch.zeros(len(x), self.width, dtype=torch.float32, device=x.device)
        box = x[:, self.box_src].to(torch.float32)
        if norm_mean.numel():
            box = ((box - norm_mean) / norm_std).clamp(-clip, clip)
        out[:, self.box_dst] = box
        out[:, self.binary_dst] = x[:, self.binary_src].to(torch.float32)
        categories = x[:, self.categorical_src].long().clamp(self.categorical_low, self.categorical_high)
        out.scatter_(1, categories + self.categorical_shift, 1.0)
        return out.reshape(*lead, self.width)
