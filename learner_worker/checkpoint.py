"""Learner checkpoints: model, target, optimizer and counters, written atomically, read without pickle.

torch.save's zip format loaded with `weights_only=True` accepts only tensors and plain containers, so a
tampered checkpoint cannot run code. The newest checkpoint is the one with the highest iteration.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from shared.store import atomic_write

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


def save_checkpoint(directory: Path, ckpt: Checkpoint, keep: int = 3) -> Path:
    if keep < 1:
        raise ValueError(f"keep must be at least 1 (the checkpoint just written), got {keep}")
    buf = io.BytesIO()
    torch.save({"iteration": ckpt.iteration, "policy_version": ckpt.policy_version,
                "transitions_trained": ckpt.transitions_trained, "algo": ckpt.algo, "env_steps": ckpt.env_steps,
                "obs_stats": ckpt.obs_stats}, buf)
    path = directory / f"learner-{ckpt.iteration:010d}.pt"
    atomic_write(path, buf.getvalue())
    for old in sorted(p for p in directory.iterdir() if _NAME.match(p.name))[:-keep]:
        old.unlink(missing_ok=True)
    return path


def load_latest_checkpoint(directory: Path) -> Checkpoint | None:
    if not directory.is_dir():
        return None
    for path in sorted((p for p in directory.iterdir() if _NAME.match(p.name)), reverse=True):
        try:
            raw = torch.load(path, weights_only=True, map_location="cpu")
            return Checkpoint(int(raw["iteration"]), int(raw["policy_version"]),
                              int(raw["transitions_trained"]), raw["algo"], int(raw.get("env_steps", 0)),
                              raw.get("obs_stats"))
        except Exception as exc:  # a damaged file must not block resuming from an older good one
            log.warning("skipping unreadable checkpoint %s: %s", path, exc)
    return None
