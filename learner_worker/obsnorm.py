"""Observation statistics owned by the learner and frozen into every policy it publishes.

Payloads hold raw observations. The learner folds each chunk it trains on into running count / mean / M2
(Chan et al.'s parallel merge, in float64, so the order chunks arrive in does not matter), its networks
normalise with the current statistics, and each published manifest carries them (shared/policy/manifest.py
ObsNorm), so every collector and the evaluator normalise exactly as the policy was trained -- a scaled-out
collector can never act with statistics of its own. The statistics are part of the learner's checkpoint.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from rlfleet.shared.policy.manifest import ObsNorm
from rlfleet.shared.policy.nets import Network


class RunningStats:
    def __init__(self, shape: tuple[int, ...], clip: float) -> None:
        self.clip = clip
        self.count = 0
        self.mean = np.zeros(shape, np.float64)
        self.m2 = np.zeros(shape, np.float64)

    def update(self, rows: np.ndarray) -> None:
        """Fold in observations [M, *shape] (rows of invalid steps must already be left out)."""
        if len(rows) == 0:
            return
        x = np.asarray(rows, np.float64)
        mean = x.mean(axis=0)
        self.merge(len(x), mean, ((x - mean) ** 2).sum(axis=0))

    def merge(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        """Fold in the statistics of `n` observations (a learner group's, all-reduced: every rank the same)."""
        if n == 0:
            return
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * n / total
        self.m2 = self.m2 + m2 + delta ** 2 * self.count * n / total
        self.count = total

    @property
    def var(self) -> np.ndarray:
        return self.m2 / self.count if self.count else np.ones_like(self.m2)

    def frozen(self) -> ObsNorm:
        return ObsNorm(mean=tuple(self.mean.reshape(-1).tolist()), var=tuple(self.var.reshape(-1).tolist()),
                       clip=self.clip)

    def apply_to(self, owner: object) -> None:
        """Give every Network the learner holds (actor, critics, targets) the current statistics."""
        norm = self.frozen()
        for value in vars(owner).values():
            if isinstance(value, nn.Module):
                for module in value.modules():
                    if isinstance(module, Network):
                        module.set_obs_norm(norm)

    def state(self) -> dict:
        return {"count": self.count, "mean": self.mean.tolist(), "m2": self.m2.tolist()}

    def load(self, state: dict) -> None:
        self.count = int(state["count"])
        self.mean = np.asarray(state["mean"], np.float64).reshape(self.mean.shape)
        self.m2 = np.asarray(state["m2"], np.float64).reshape(self.m2.shape)
