"""The learner's side of the observation encoding (shared/policy/obs_encoding.py): the same one-hot / binary /
normalised-box encoding in torch, from the same `ObsLayout`, batched over any leading axes.

It is written with gathers and comparisons only, never an indexed write into a zero tensor: torch's ONNX exporter
fixes the batch size of an indexed write (index_put) to the traced example's and dies of a division by zero on an
empty one, so an exported policy (shared/policy/export.py) could not take other batch sizes. Here each kind of part
gives its encoded values side by side (box values, binary values, every integer's one-hot as equality with the
values it may take), and one gather puts them in the parts' order.

Its index tensors are non-persistent buffers: they follow the network to its device but stay out of the state
dict, so a policy file holds the weights alone and the manifest's `spaces.obs.parts` say how to encode."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlfleet.shared.policy.obs_encoding import ObsLayout


class TorchObsEncoder(nn.Module):
    box_src: torch.Tensor
    binary_src: torch.Tensor
    one_hot_src: torch.Tensor  # per one-hot column: the raw column of its integer
    one_hot_low: torch.Tensor  # that integer's lowest and highest values (it is clamped into them)
    one_hot_high: torch.Tensor
    one_hot_value: torch.Tensor  # the value the column stands for
    order: torch.Tensor  # encoded column k is column order[k] of [box values, binary values, one-hot columns]

    def __init__(self, layout: ObsLayout) -> None:
        super().__init__()
        self.raw, self.width = layout.raw, layout.width
        counts = layout.categorical_high - layout.categorical_low + 1
        values = np.concatenate([np.zeros(0, np.int64)] + [np.arange(low, high + 1) for low, high in
                                zip(layout.categorical_low, layout.categorical_high, strict=True)])
        one_hot_dst = np.repeat(layout.categorical_shift, counts) + values
        sources = np.concatenate([layout.box_dst, layout.binary_dst, one_hot_dst]).astype(np.int64)
        order = np.empty(layout.width, np.int64)
        order[sources] = np.arange(len(sources))
        buffers = {"box_src": layout.box_src, "binary_src": layout.binary_src,
                   "one_hot_src": np.repeat(layout.categorical_src, counts),
                   "one_hot_low": np.repeat(layout.categorical_low, counts),
                   "one_hot_high": np.repeat(layout.categorical_high, counts),
                   "one_hot_value": values.astype(np.int64), "order": order}
        for name, array in buffers.items():
            self.register_buffer(name, torch.as_tensor(np.asarray(array, np.int64)), persistent=False)
        # fixed when the network is built, so tracing sees no empty gathers (the exporter cannot take those)
        self.has = {"box": len(layout.box_src) > 0, "binary": len(layout.binary_src) > 0, "one_hot": len(values) > 0}

    def forward(self, obs: torch.Tensor, norm_mean: torch.Tensor, norm_std: torch.Tensor,
                clip: float) -> torch.Tensor:
        """[*lead, raw] -> [*lead, width] float32; normalised box values where norm_mean has any."""
        x = obs.reshape(-1, self.raw)
        pieces = []
        if self.has["box"]:
            box = x[:, self.box_src].to(torch.float32)
            if norm_mean.numel():
                box = ((box - norm_mean) / norm_std).clamp(-clip, clip)
            pieces.append(box)
        if self.has["binary"]:
            pieces.append(x[:, self.binary_src].to(torch.float32))
        if self.has["one_hot"]:
            integers = torch.minimum(torch.maximum(x[:, self.one_hot_src].long(), self.one_hot_low), self.one_hot_high)
            pieces.append((integers == self.one_hot_value).to(torch.float32))
        out = torch.cat(pieces, dim=1)[:, self.order] if pieces else x.new_zeros((len(x), 0), dtype=torch.float32)
        return out if obs.dim() == 2 else out.reshape(*obs.shape[:-1], self.width)  # no traced batch size
