"""Value transforms and the categorical value head (config: shared/config/values.py).

`h` / `h_inv` are Pohlen et al. 2018's transform and its closed-form inverse. `scalar_to_support` is the
two-hot projection of a value onto evenly spaced atoms (the two atoms around it share its mass, so the
expectation gives the value back); values beyond the support are clamped to its ends.

`ValueCodec` is the one place a learner turns network outputs into raw values and computes a value loss
against raw targets, whatever the representation: the algorithms never branch on it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlfleet.shared.config.values import CriticValue, Support, ValueTransform


def h(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.sign(x) * (torch.sqrt(x.abs() + 1) - 1) + eps * x


def h_inv(y: torch.Tensor, eps: float) -> torch.Tensor:
    """The exact inverse of `h`: solve eps*u^2 + u - |y| = 0 for u = sqrt(|x|+1) (the positive root)."""
    u = (torch.sqrt(1 + 4 * eps * (y.abs() + 1 + eps)) - 1) / (2 * eps)
    return torch.sign(y) * (u.pow(2) - 1)


def atoms(support: Support, device: torch.device | None = None) -> torch.Tensor:
    return torch.linspace(support.min, support.max, support.bins, device=device)


def scalar_to_support(x: torch.Tensor, support: Support) -> torch.Tensor:
    """[...] values -> [..., bins] probabilities: two-hot on the neighbouring atoms (clamped to the support)."""
    x = x.clamp(support.min, support.max)
    step = (support.max - support.min) / (support.bins - 1)
    pos = (x - support.min) / step
    low = pos.floor().clamp(max=support.bins - 2)
    upper = pos - low  # in [0, 1]: the upper atom's share
    probs = torch.zeros(*x.shape, support.bins, dtype=x.dtype, device=x.device)
    probs.scatter_(-1, low.long().unsqueeze(-1), (1 - upper).unsqueeze(-1))
    probs.scatter_add_(-1, (low.long() + 1).unsqueeze(-1), upper.unsqueeze(-1))
    return probs


def support_to_scalar(probs: torch.Tensor, support: Support) -> torch.Tensor:
    """[..., bins] probabilities -> [...] expectations over the atoms."""
    return (probs * atoms(support, probs.device).to(probs.dtype)).sum(-1)


class ValueCodec:
    """Network outputs <-> raw values for one value representation."""

    def __init__(self, value: ValueTransform) -> None:
        self.value = value
        self.pohlen = value.transform == "pohlen"
        self.support = value.support if isinstance(value, CriticValue) and value.head == "categorical" else None
        self.outputs = 1 if self.support is None else self.support.bins

    def encode(self, raw: torch.Tensor) -> torch.Tensor:
        """Raw values -> the space the network is trained in (h-space with the transform)."""
        return h(raw, self.value.eps) if self.pohlen else raw

    def decode(self, trained: torch.Tensor) -> torch.Tensor:
        """Values in the trained space -> raw values."""
        return h_inv(trained, self.value.eps) if self.pohlen else trained

    def values(self, out: torch.Tensor) -> torch.Tensor:
        """A critic's [B, outputs] outputs -> [B] raw values."""
        if self.support is None:
            return self.decode(out.squeeze(-1))
        return self.decode(support_to_scalar(out.softmax(-1), self.support))

    def loss(self, out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-row value loss of [B, outputs] outputs against [B] raw targets: half the squared error in the trained
        space, or the cross-entropy against the target's two-hot projection."""
        trained = self.encode(targets)
        if self.support is None:
            return 0.5 * (out.squeeze(-1) - trained).pow(2)
        return -(scalar_to_support(trained, self.support) * F.log_softmax(out, -1)).sum(-1)
