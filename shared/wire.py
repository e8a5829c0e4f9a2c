"""Pydantic models of every REST request and response: the only thing services share.

Requests forbid unknown fields and reject NaN/inf, so a malformed report is a 422 at the door instead of a
corrupted counter later. Responses are the same models, so the OpenAPI document is complete.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from shared.algorithms import AlgoConfig
from shared.config import (
    CollectorConfig,
    EnvConfig,
    EvalConfig,
    LearnerConfig,
    ReplayConfig,
    RunConfig,
    SamplingConfig,
    SamplingUnit,
)
from shared.hooks import HooksFailed
from shared.ids import ID_PATTERN
from shared.manifest import Behaviour
from shared.spaces import Spaces

# Re-exported: services import every wire model and field type from this one module.
from shared.wire_base import (
    Count as Count,
)
from shared.wire_base import (
    EntryId as EntryId,
)
from shared.wire_base import (
    FlatIndex as FlatIndex,
)
from shared.wire_base import (
    Id as Id,
)
from shared.wire_base import (
    PayloadPath as PayloadPath,
)
from shared.wire_base import (
    RequestId as RequestId,
)
from shared.wire_base import (
    Return as Return,
)
from shared.wire_base import (
    RunState as RunState,
)
from shared.wire_base import (
    Sha256 as Sha256,
)
from shared.wire_base import (
    Wire as Wire,
)
from shared.wire_base import (
    WorkerKind as WorkerKind,
)
from shared.wire_evaluations import (
    EvaluationReport as EvaluationReport,
)
from shared.wire_evaluations import (
    EvaluationResult as EvaluationResult,
)
from shared.wire_evaluations import (
    HoldoutReport as HoldoutReport,
)
from shared.wire_evaluations import (
    HoldoutResult as HoldoutResult,
)
from shared.wire_evaluations import (
    Seed as Seed,
)


class ErrorBody(Wire):
    error: str = Field(description="machine-readable error code")
    message: str = Field(description="what is wrong and what to change")


class PolicyRef(Wire):
    version: Annotated[int, Field(ge=1)]
    path: PayloadPath
    sha256: Sha256


class Directive(Wire):
    """What the coordinator tells a worker on every reply: keep going, pause, or stop; and the latest policy."""

    run_state: RunState
    policy: PolicyRef | None = None
    pause_seconds: Annotated[float, Field(ge=0)] = 0.0
    env_steps_total: Count = 0


class RegisterRequest(Wire):
    kind: WorkerKind
    name: Annotated[str, Field(pattern=ID_PATTERN, description="human-readable name, e.g. the host name")]
    restarts: Count = Field(0, description="how often a supervisor restarted this worker's process")
    last_error: Annotated[str, Field(max_length=500)] | None = Field(
        None, description="why this worker's previous process ended, as its supervisor saw it (shown in status)")
    request_id: RequestId | None = None


class RegisterResponse(Wire):
    worker_id: Id
    lease_seconds: float
    heartbeat_seconds: float
    max_wait_seconds: float = Field(description="longest long-poll `wait` the heartbeat route accepts")
    run_name: Id
    directive: Directive


class HeartbeatResponse(Wire):
    lease_seconds: float
    directive: Directive


class CollectorTask(Wire):
    kind: Literal["collector"] = "collector"
    task_id: Id
    env: EnvConfig
    spaces: Spaces = Field(description="the env's spaces as the coordinator derived them; chunks follow them")
    behaviour: Behaviour = Field(description="how to act: the algorithm's action head and exploration")
    collector: CollectorConfig
    sampling: SamplingConfig
    seed: int
    policy: PolicyRef | None
    lockstep: bool = Field(False, description="deterministic run: after each chunk, wait (however long) for the "
                                              "policy the learner trained on it")


class LearnerTask(Wire):
    kind: Literal["learner"] = "learner"
    task_id: Id
    buffer_id: Id
    algo: AlgoConfig
    env: EnvConfig
    spaces: Spaces
    behaviour: Behaviour
    learner: LearnerConfig = LearnerConfig()
    deterministic: bool = False
    replay: ReplayConfig
    sampling: SamplingConfig
    collector: CollectorConfig
    seed: int


class EvaluatorTask(Wire):
    kind: Literal["evaluator"] = "evaluator"
    task_id: Id
    env: EnvConfig
    spaces: Spaces
    evaluation: EvalConfig
    seed: int


Task = Annotated[CollectorTask | LearnerTask | EvaluatorTask, Field(discriminator="kind")]


class ClaimResponse(Wire):
    task: Task | None = Field(description="null when no task is available for this worker kind")
    directive: Directive


class EpisodeStat(Wire):
    ret: Return
    length: Annotated[int, Field(ge=1)]


class ChunkReport(Wire):
    chunk_id: Id
    worker_id: Id
    task_id: Id
    payload_path: PayloadPath
    sha256: Sha256
    size_bytes: Annotated[int, Field(ge=1)]
    env_steps: Annotated[int, Field(ge=1, le=1_000_000)]
    num_envs: Annotated[int, Field(ge=1, le=4096, description="env columns; step t of env i is row t*num_envs+i")] = 1
    ends: Annotated[list[FlatIndex], Field(max_length=1_000_000, description=(
        "rows after which that env's episode does not continue (terminated, truncated or env error), ascending"))] = []
    fresh_columns: Annotated[list[Annotated[int, Field(ge=0, le=4095)]], Field(max_length=4096, description=(
        "env columns whose first row in this chunk begins an episode"))] = []
    episodes: Annotated[list[EpisodeStat], Field(max_length=100_000)] = []
    policy_version: Count
    env_errors: Count = Field(0, description="steps on which an environment raised (excluded from training)")


class ChunkAck(Wire):
    chunk_id: Id
    duplicate: bool = Field(description="true when this chunk id was already acknowledged; nothing changed")
    directive: Directive


class ChunkBatch(Wire):
    """Several chunk reports in one request: each is validated and acknowledged on its own terms."""

    reports: Annotated[list[ChunkReport], Field(min_length=1, max_length=64)]


class ChunkVerdict(Wire):
    chunk_id: Id
    duplicate: bool = Field(description="true when this chunk id was already acknowledged; nothing changed")
    error: str | None = Field(None, description="why this report was refused (machine-readable); null if accepted")
    message: str | None = Field(None, description="what is wrong with this report and what to change")


class ChunkBatchAck(Wire):
    results: list[ChunkVerdict] = Field(description="one verdict per report, in request order")
    directive: Directive


class CorruptReport(Wire):
    """A learner found a sampled payload unusable (hash mismatch, undecodable, wrong shapes, unreadable)."""

    worker_id: Id
    chunk_id: Id
    reason: Annotated[str, Field(min_length=1, max_length=500)]


class CorruptAck(Wire):
    removed: bool = Field(description="true when the chunk was still in the buffer and has now been removed")
    directive: Directive


class SampleRequest(Wire):
    worker_id: Id
    request_id: RequestId | None = None
    batch_size: Annotated[int, Field(ge=1, le=4096)]
    num_batches: Annotated[int, Field(ge=1, le=256)] = 1


class SampledChunk(Wire):
    chunk_id: Id
    payload_path: PayloadPath
    sha256: Sha256
    policy_version: Count
    num_envs: Annotated[int, Field(ge=1)]


class SampleResponse(Wire):
    """Item references, columnar: item k is `lengths[k]` steps of one env column of chunks[chunk_index[k]],
    starting at flat row offsets[k] (= t * num_envs + env) and advancing num_envs rows per step. For
    unit=chunk an item is the whole chunk (offset 0, length = its rows). Batch b holds items b*B .. b*B+B-1."""

    unit: SamplingUnit
    chunks: list[SampledChunk]
    chunk_index: list[int]
    offsets: list[int]
    lengths: list[int]
    ids: list[int] = Field(description="entry id per item, for priority updates")
    weights: list[float] = Field(description="importance weight per item (prioritized sampler; else all 1)")
    batch_size: int
    buffer_transitions: Count
    directive: Directive


class PriorityUpdate(Wire):
    worker_id: Id
    ids: Annotated[list[EntryId], Field(min_length=1, max_length=1_000_000)]
    priorities: Annotated[list[Annotated[float, Field(ge=0, le=1e30)]], Field(min_length=1, max_length=1_000_000)]


class PriorityAck(Wire):
    updated: Count
    ignored: Count = Field(description="ids no longer in the buffer (evicted or removed since sampled)")
    directive: Directive


class LearnReport(Wire):
    worker_id: Id
    iteration: Count
    losses: dict[Annotated[str, Field(pattern=ID_PATTERN)], float] = Field(default_factory=dict, max_length=64)
    transitions_trained: Count = Field(description="sampled transitions consumed since the learner started")
    hooks_failed: HooksFailed = Field(default_factory=dict)  # absent from learners of earlier releases


class PolicyPublish(Wire):
    worker_id: Id
    policy: PolicyRef
    iteration: Count


class Ack(Wire):
    directive: Directive


class WorkerStatus(Wire):
    worker_id: Id
    kind: WorkerKind
    name: str
    task_id: str | None
    last_seen_seconds_ago: float
    restarts: int = Field(description="how often a supervisor restarted this worker's process")
    last_error: str | None = Field(None, description=(
        "why its previous process ended, as reported at registration; kept in memory only (a restarted "
        "coordinator forgets it)"))
    corrupt_chunks: int = Field(0, description="payloads of this worker that a learner found unusable")
    flagged: bool = Field(False, description="too many corrupt payloads: its chunk reports are refused")


class TaskStatus(Wire):
    task_id: Id
    kind: WorkerKind
    state: Literal["pending", "claimed"]
    worker_id: str | None
    claims: int


class BufferStatus(Wire):
    buffer_id: Id
    sampler: str
    unit: SamplingUnit
    chunks: int
    transitions: int
    items: int = Field(description="sampleable items (transitions, sequence starts, episodes or chunks)")
    capacity_transitions: int
    evicted_chunks: int = Field(description="chunks whose every row was overwritten at capacity (FIFO)")
    removed_max_use: int = Field(description="items dropped after max_use samples")
    removed_stale: int = Field(description="chunks dropped for lagging the latest policy by > max_staleness")
    max_priority: float
    beta: float
    inserted_transitions: int = Field(description="counted by the rate limiter (never decreases)")
    sampled_transitions: int
    samples_per_insert: float = Field(description="the configured target ratio")
    tolerance_transitions: int


class PolicyLagStatus(Wire):
    """Policy versions between the data and the latest policy: at ingest for every chunk, at sampling per item."""

    ingest_mean: float
    ingest_max: int
    sampled_mean: float
    sampled_max: int
    ingest_histogram: dict[str, int] = Field(description="chunks per lag; '8+' collects the tail")


class JournalStatus(Wire):
    commits: int = Field(description="SQLite transactions since the coordinator started")
    submissions: int = Field(description="journalled mutations since the coordinator started (group commit)")
    chunk_ids_remembered: int = Field(description="acknowledged chunk ids inside the idempotency window")


class LearnerStatus(Wire):
    iteration: int
    transitions_trained: int
    losses: dict[str, float]
    samples_per_insert: float = Field(description="achieved ratio of sampled to inserted transitions")
    hooks_failed: HooksFailed = Field(default_factory=dict, description=(
        "learner hooks that raised during this run, each with its first error; the learner process it failed "
        "in switched it off"))


class SeedsUsed(Wire):
    """The base seed of every vector env a mode used (env i of a block: base + i; shared/seeds.py)."""

    train: list[int] = Field(description="one block per collector task claim")
    valid: list[int] = Field(description="one block per validation")
    test: list[int] = Field(description="one block per held-out test")
    envs: dict[str, int] = Field(description="envs per block in each mode")


class Status(Wire):
    run_name: str
    run_state: RunState
    run_message: str
    coordinator_resumes: int = Field(description="how often the coordinator restarted and resumed this run")
    wall_seconds: float
    env_steps: int
    env_steps_per_second: float = Field(description="over the last few seconds")
    episodes: int
    chunks: int
    duplicate_chunks: int
    env_errors: int = Field(description="environment exceptions contained by collectors")
    corrupt_chunks: int = Field(0, description="chunks a learner found unusable and the coordinator removed")
    recent_return_mean: float | None = Field(description="mean training return over the last 100 episodes")
    policy_version: int
    policy_lag: PolicyLagStatus
    learner: LearnerStatus
    latest_evaluation: EvaluationResult | None
    best_evaluation: EvaluationResult | None
    latest_test: HoldoutResult | None = None
    confirmed_by: HoldoutResult | None = Field(None, description="the held-out test that confirmed the solve")
    tests_rejected: int = Field(0, description="validation passes a held-out test did not confirm")
    test_in_flight: int | None = Field(None, description="policy version whose held-out test is running")
    seeds: SeedsUsed | None = None
    workers: list[WorkerStatus]
    tasks: list[TaskStatus]
    buffers: list[BufferStatus]
    journal: JournalStatus


class RunResponse(Wire):
    run_name: str
    run_state: RunState
    config: RunConfig


class StopRequest(Wire):
    reason: Annotated[str, Field(max_length=500)] = "stopped by admin"
