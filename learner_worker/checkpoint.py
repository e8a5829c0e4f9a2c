"""Learner checkpoints: model, target, optimizer and counters, written atomically, read without pickle.

torch.save's zip format loaded with `weights_only=True` accepts only tensors and plain containers, so a
tampered checkpoint cannot run code. The newest checkpoint is the one with the highest iteration. They live in
the run's `checkpoints` store (shared/storage/factory.py): a directory, or an object store a restarted learner on
another host can read.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass

import torch

from rlfleet.shared.storage.protocol import PayloadStore, StoreUnavailable

log = logging.getLogger(__name__)
_NAME = re.compile(r"^learner-(\d{10})\.pt$")


@dataclass
class Checkpoint:
    iteration: int
    policy_version: int
    transitions_trained: int
    algo: dict
    env_steps: int = 0  # the run's acknowledged env steps when the checkpoint was taken
    obs_stats: dict | None = None  # the running observation statistics (env wrapper normalize_obs)


def save_checkpoint(store: PayloadStore, ckpt: Checkpoint, keep: int = 3) -> str:
    """Write the checkpoint, then delete all but the newest `keep`; returns its path in the store."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1 (the checkpoint just written), got {keep}")
    buf = io.BytesIO()
    torch.save({"iteration": ckpt.iteration, "policy_version": ckpt.policy_version,
                "transitions_trained": ckpt.transitions_trained, "algo": ckpt.algo, "env_steps": ckpt.env_steps,
                "obs_stats": ckpt.obs_stats}, buf)
    path = f"learner-{ckpt.iteration:010d}.pt"
    store.put(path, buf.getvalue())
    old = _checkpoints(store)[:-keep]
    if old:
        store.delete_many(old)
    return path


def _checkpoints(store: PayloadStore) -> list[str]:
    """Checkpoint names in the store, oldest first (the names sort by iteration)."""
    return sorted(path for path in store.list_prefix("") if _NAME.match(path))


def load_latest_checkpoint(store: PayloadStore) -> Checkpoint | None:
    for path in reversed(_checkpoints(store)):
        try:
            raw = torch.load(io.BytesIO(store.get(path)), weights_only=True, map_location="cpu")
            return Checkpoint(int(raw["iteration"]), int(raw["policy_version"]),
                              int(raw["transitions_trained"]), raw["algo"], int(raw.get("env_steps", 0)),
                              raw.get("obs_stats"))
        except StoreUnavailable:
            raise  # not a damaged file: resuming from an older one (or none) would throw training away
        except Exception as exc:  # a damaged file must not block resuming from an older good one
            log.warning("skipping unreadable checkpoint %s: %s", path, exc)
    return None
