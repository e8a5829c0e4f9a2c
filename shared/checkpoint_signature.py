"""What a learner checkpoint says of itself, readable without torch: its signature, a JSON file beside it.

A checkpoint (`learner-NNNNNNNNNN.pt`, learner_worker/checkpoint.py) is torch's zip format, which only torch can
read; the coordinator never imports torch (it would cost its process hundreds of MiB). So the learner writes
`learner-NNNNNNNNNN.json` beside each checkpoint: the algorithm that trained it, its policy manifest (spaces,
encoder, network, head, core) and the dtype and shape of every tensor it holds (model, target and optimizer state).
Loading another run's checkpoint (`POST /v1/run/load-checkpoint`) compares the source's signature with this run's
latest and refuses the first difference by name, so a checkpoint that would half-load is never offered to a
learner; the learner checks the tensors themselves again before it takes any of them.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

CHECKPOINT_NAME = re.compile(r"^learner-(\d{10})\.pt$")
SIGNATURE_FORMAT = "rlfleet.checkpoint-signature"


def signature_name(checkpoint: str) -> str:
    """The signature file of checkpoint `checkpoint` (a name matching CHECKPOINT_NAME)."""
    return checkpoint.removesuffix(".pt") + ".json"


class CheckpointSignature(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = SIGNATURE_FORMAT
    algorithm: str
    """The registry name of the algorithm whose learner wrote the checkpoint."""
    manifest: dict[str, Any]
    """The policy manifest (shared/policy/manifest.py) as JSON, without the observation statistics."""
    tensors: dict[str, tuple[str, tuple[int, ...]]]
    """Every tensor of the learner's state by its dotted path: (dtype, shape)."""
    iteration: int
    env_steps: int


def incompatibility(source: CheckpointSignature, target: CheckpointSignature) -> str | None:
    """Why `source`'s checkpoint cannot continue the run that wrote `target`, naming the first difference in the
    order that explains it best (algorithm, spaces, network, then tensors); None when it can."""
    if source.algorithm != target.algorithm:
        return f"the checkpoint was trained by {source.algorithm}, this run trains {target.algorithm}"
    for part in ("spaces", "encoder", "net", "head", "core"):
        theirs, ours = source.manifest.get(part), target.manifest.get(part)
        if theirs != ours:
            return f"its policy's {part} is {_short(theirs)}, this run's is {_short(ours)}"
    missing = sorted(set(target.tensors) - set(source.tensors))
    extra = sorted(set(source.tensors) - set(target.tensors))
    if missing or extra:
        return (f"its learner state lacks {_few(missing)} and has {_few(extra)} this run's has not"
                if missing and extra else f"its learner state lacks {_few(missing)}" if missing
                else f"its learner state has {_few(extra)}, which this run's has not")
    for key in sorted(target.tensors):
        if source.tensors[key] != target.tensors[key]:
            (dtype, shape), (our_dtype, our_shape) = source.tensors[key], target.tensors[key]
            return f"tensor {key} is {dtype}{list(shape)}, this run's is {our_dtype}{list(our_shape)}"
    return None


def _few(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (f" (and {len(keys) - 3} more)" if len(keys) > 3 else "")


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 160 else text[:157] + "..."
