"""Signed learner checkpoints as a coordinator sees them: a checkpoint file (bytes it only copies) beside its
signature (shared/checkpoint_signature.py), written into a run's checkpoints directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlfleet.shared.checkpoint_signature import CheckpointSignature, signature_name

MANIFEST: dict[str, Any] = {"spaces": {"obs": [4], "act": 2}, "encoder": {"kind": "mlp"}, "net": {"hidden": [32]},
                            "head": "q_values", "core": None}
TENSORS: dict[str, tuple[str, tuple[int, ...]]] = {"model.0.weight": ("float32", (32, 4)),
                                                   "model.0.bias": ("float32", (32,))}


def write_signed(run_dir: Path, iteration: int, algorithm: str, *, manifest: dict[str, Any] | None = None,
                 tensors: dict[str, tuple[str, tuple[int, ...]]] | None = None, env_steps: int = 0) -> bytes:
    """Write `learner-<iteration>.pt` (distinct bytes) and its signature under `run_dir`/checkpoints; the bytes."""
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"learner-{iteration:010d}.pt"
    data = f"checkpoint {iteration} of {run_dir.name}".encode()
    (folder / name).write_bytes(data)
    signature = CheckpointSignature(algorithm=algorithm, manifest=MANIFEST if manifest is None else manifest,
                                    tensors=TENSORS if tensors is None else tensors, iteration=iteration,
                                    env_steps=env_steps)
    (folder / signature_name(name)).write_text(signature.model_dump_json())
    return data
