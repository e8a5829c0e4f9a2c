"""The base model and field types of every wire model (shared/wire/__init__.py and the modules it gathers)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlfleet.shared import FIELD_DOCS
from rlfleet.shared.ids import ID_PATTERN, PAYLOAD_PATH_PATTERN, SHA256_PATTERN

Id = Annotated[str, Field(pattern=ID_PATTERN)]  # each field says who issues it
RequestId = Annotated[str, Field(pattern=ID_PATTERN, description=(
    "client-generated id of this request; a retry with the same id gets the first reply and changes nothing"))]
PayloadPath = Annotated[str, Field(pattern=PAYLOAD_PATH_PATTERN, description="path relative to the store root")]
Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN, description="lower-case hex sha256 of the file")]
Count = Annotated[int, Field(ge=0, le=2**53)]
# Returns are bounded so means and std-devs over them stay finite (1e308 + 1e308 would be inf).
Return = Annotated[float, Field(ge=-1e12, le=1e12, description="undiscounted episode return")]
WorkerKind = Literal["collector", "learner", "evaluator"]
FlatIndex = Annotated[int, Field(ge=0, le=2**31 - 1)]
EntryId = Annotated[int, Field(ge=0, le=2**62, description="unique id of a buffer item (never reused)")]
RunState = Literal["running", "solved", "budget_exhausted", "stopped", "failed"]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=FIELD_DOCS)


class PolicyRef(Wire):
    version: Annotated[int, Field(ge=1)]
    """Policy version, strictly increasing from 1."""
    path: PayloadPath
    sha256: Sha256


class CheckpointLoadRef(Wire):
    """A checkpoint load an operator asked for (`POST /v1/run/load-checkpoint`), as the learner sees it."""

    load_id: Annotated[str, Field(pattern=ID_PATTERN)]
    """The load's id (its request id): a learner whose state already includes this load does not take it again."""
    path: PayloadPath
    """The staged checkpoint in this run's checkpoints store (`loads/<id>.pt`)."""


class Score(Wire):
    """A validation or held-out test in brief: what a learner's hooks see of the latest one."""

    policy_version: Annotated[int, Field(ge=1)]
    """The version evaluated or tested."""
    mean: float
    """Mean return over its episodes."""
    env_steps: Count
    """Run env steps when it was reported."""


class Directive(Wire):
    """What the coordinator tells a worker on every reply: keep going, pause, or stop; and the latest policy."""

    run_state: RunState
    """Running, or how the run ended: solved, budget_exhausted, stopped, failed."""
    policy: PolicyRef | None = None
    """The latest published policy; null before the first publish."""
    pause_seconds: Annotated[float, Field(ge=0)] = 0.0
    """0: keep collecting. Above 0 the rate limiter holds collectors back: collect nothing, re-check (heartbeat) after
    this many seconds, resume once it is 0 again. A re-check interval, not a sleep per chunk.
    """
    env_steps_total: Count = 0
    """Acknowledged env steps of the whole run (exploration schedules are a function of it)."""
    checkpoints: Count = 0
    """Operator checkpoint requests so far: a learner that has handled fewer checkpoints at once."""
    evaluations: Count = 0
    """Operator evaluation requests so far: an evaluator that has handled fewer validates the latest policy now."""
    settings: Count = 0
    """Live setting changes so far: a worker that has seen fewer re-reads its task (claim) to apply them."""
    checkpoint_load: CheckpointLoadRef | None = None
    """Learners only: the latest checkpoint load from another run; a learner whose state does not include it yet
    continues from that checkpoint. Null before the first, and for other workers."""
    final_test: Annotated[int, Field(ge=1)] | None = None
    """A run with no threshold whose budget is used up: the evaluator runs the held-out test of this version (the
    best validated) now; the run ends once it reports. Null otherwise."""
    recent_return_mean: float | None = None
    """Learners only (their hooks see it): mean training return over the run's last 100 episodes; null before the
    first episode ends, and for other workers."""
    latest_validation: Score | None = None
    """Learners only (their hooks see it): the latest validation; null before the first, and for other workers."""
    latest_test: Score | None = None
    """Learners only (their hooks see it): the latest held-out test; null before the first, and for other workers."""
