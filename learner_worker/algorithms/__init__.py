"""Learner implementations, one module per algorithm, found through the registry's `learner` path.

Every learner takes (spaces, its parameters, the collectors' behaviour, seed, device) and offers `update` (a batch of
transitions for the replay loop, a list of chunks for the chunk loop), the published policy's state dict and
manifest, and its full state for checkpoints. The loops (learner_worker/loops.py) do everything else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from rlfleet.shared.algorithms import spec_of
from rlfleet.shared.policy.manifest import PolicyManifest
from rlfleet.shared.wire import LearnerTask

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group


class Learner(Protocol):
    td_abs: np.ndarray | None  # replay loop: |TD error| per row of the last batch, sent back as priorities

    def update(self, batch: Any) -> dict[str, float]: ...
    def policy_state(self) -> dict[str, torch.Tensor]: ...
    def manifest(self) -> PolicyManifest: ...
    def state(self) -> dict: ...
    def load(self, state: dict) -> None: ...
    def join(self, group: Group) -> None: ...  # learners whose registry entry declares `shares` (learner groups)


def load_learner(task: LearnerTask, device: torch.device) -> Learner:
    module, _, name = spec_of(task.algo).learner.partition(":")
    learner: Learner = getattr(importlib.import_module(module), name)(task.spaces, task.algo, task.behaviour,
                                                                      task.seed, device)
    return learner
