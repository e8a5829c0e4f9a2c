"""Learner checkpoints: model, target, optimizer and counters, written atomically, read without pickle.

torch.save's zip format loaded with `weights_only=True` accepts only tensors and plain containers, so a
tampered checkpoint cannot run code. The newest checkpoint is the one with the highest iteration. They live in
the run's `checkpoints` store (shared/storage/factory.py): a directory, or an object store a restarted learner on
another host can read. Beside each one, its signature (shared/checkpoint_signature.py) says what it holds to
readers without torch: the coordinator checks a checkpoint another run offers against it.

A checkpoint loaded from another run (`POST /v1/run/load-checkpoint`) is staged in this run's store under
`loads/<id>.pt`; every checkpoint written after it names that load (`loaded`), so a learner restarted before it
wrote one takes the load up again, and one restarted after does not take it twice.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Any

import torch

from rlfleet.shared.checkpoint_signature import CHECKPOINT_NAME, CheckpointSignature, signature_name
from rlfleet.shared.storage.protocol import PayloadStore, StoreUnavailable

log = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    iteration: int
    policy_version: int
    transitions_trained: int
    algo: dict
    env_steps: int = 0  # the run's acknowledged env steps when the checkpoint was taken
    obs_stats: dict | None = None  # the running observation statistics (env wrapper normalize_obs)
    loaded: str | None = None  # the id of the last checkpoint load from another run this state includes


def tensor_layout(state: Any, prefix: str = "") -> dict[str, tuple[str, tuple[int, ...]]]:
    """Every tensor in `state` (nested dicts and lists) by dotted path: its dtype and shape."""
    if isinstance(state, torch.Tensor):
        return {prefix: (str(state.dtype).removeprefix("torch."), tuple(state.shape))}
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, list | tuple) else ()
    layout: dict[str, tuple[str, tuple[int, ...]]] = {}
    for key, value in items:
        layout.update(tensor_layout(value, f"{prefix}.{key}" if prefix else str(key)))
    return layout


def _encode(ckpt: Checkpoint) -> bytes:
    buf = io.BytesIO()
    torch.save({"iteration": ckpt.iteration, "policy_version": ckpt.policy_version,
                "transitions_trained": ckpt.transitions_trained, "algo": ckpt.algo, "env_steps": ckpt.env_steps,
                "obs_stats": ckpt.obs_stats, "loaded": ckpt.loaded}, buf)
    return buf.getvalue()


def decode_checkpoint(data: bytes) -> Checkpoint:
    """A checkpoint from its bytes (weights_only: a tampered file cannot run code)."""
    raw = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    return Checkpoint(int(raw["iteration"]), int(raw["policy_version"]), int(raw["transitions_trained"]), raw["algo"],
                      int(raw.get("env_steps", 0)), raw.get("obs_stats"), raw.get("loaded"))


def save_checkpoint(store: PayloadStore, ckpt: Checkpoint, keep: int = 3, *, algorithm: str | None = None,
                    manifest: dict[str, Any] | None = None) -> str:
    """Write the checkpoint, and with `algorithm` (which trained it) and `manifest` (its policy's) its signature,
    then delete all but the newest `keep`; returns its path in the store. The trainer always signs; a checkpoint
    without a signature resumes its own run but is not offered to another."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1 (the checkpoint just written), got {keep}")
    path = f"learner-{ckpt.iteration:010d}.pt"
    store.put(path, _encode(ckpt))
    if algorithm is not None and manifest is not None:
        signature = CheckpointSignature(algorithm=algorithm, manifest=manifest, tensors=tensor_layout(ckpt.algo),
                                        iteration=ckpt.iteration, env_steps=ckpt.env_steps)
        store.put(signature_name(path), signature.model_dump_json().encode())
    old = _checkpoints(store)[:-keep]
    if old:
        store.delete_many([*old, *(signature_name(name) for name in old)])
    return path


def _checkpoints(store: PayloadStore) -> list[str]:
    """Checkpoint names in the store, oldest first (the names sort by iteration)."""
    return sorted(path for path in store.list_prefix("") if CHECKPOINT_NAME.match(path))


def load_latest_checkpoint(store: PayloadStore) -> Checkpoint | None:
    for path in reversed(_checkpoints(store)):
        try:
            return decode_checkpoint(store.get(path))
        except StoreUnavailable:
            raise  # not a damaged file: resuming from an older one (or none) would throw training away
        except Exception as exc:  # a damaged file must not block resuming from an older good one
            log.warning("skipping unreadable checkpoint %s: %s", path, exc)
    return None
