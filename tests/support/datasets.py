"""A small recorded CartPole dataset, written through shared.payloads.recordings as `rlfleet record` writes one."""

from __future__ import annotations

import numpy as np

from rlfleet.shared.payloads.recordings import DatasetManifest, write_dataset
from rlfleet.shared.storage.local import LocalStore
from tests.support.policies import CARTPOLE


def episode(length: int, first: int) -> tuple[dict[str, np.ndarray], float]:
    """A one-env episode as the collectors' rollout writes it: arrays of shape (steps, 1, ...)."""
    obs = (first + np.arange(length * 4, dtype=np.float32)).reshape(length, 1, 4)
    valid = np.ones((length, 1), bool)
    valid[-1, 0] = length % 2 == 0  # an env error on the last step of odd episodes: that row is not trained on
    return {"obs": obs, "actions": (np.arange(length) % 2).astype(np.int64).reshape(length, 1),
            "rewards": np.ones((length, 1), np.float32), "valid": valid,
            "terminated": np.zeros((length, 1), bool)}, float(length)


def write_demo_dataset(store: LocalStore, name: str = "demo", n: int = 5) -> DatasetManifest:
    """`n` episodes of 10, 11, ... steps, 40% of them held out for validation."""
    return write_dataset(store, name, "CartPole-v1", CARTPOLE, [episode(10 + i, 1000 * i) for i in range(n)],
                         valid_fraction=0.4, seed=0, source_policy="data/runs/r/best/policy.safetensors",
                         source_manifest_sha256="ab" * 32, stochastic=False)
