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
    Directive as Directive,
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
    PolicyRef as PolicyRef,
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
from shared.wire_control import (
    ControlStatus as ControlStatus,
)
from shared.wire_control import (
    EvaluateRequest as EvaluateRequest,
)
from shared.wire_control import (
    SettingChange as SettingChange,
)
from shared.wire_control import (
    SettingsRequest as SettingsRequest,
)
from shared.wire_datasets import DatasetStatus
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
from shared.wire_generations import PopulationStatus


class ErrorBody(Wire):
    error: str = Field(description="machine-readable error code")
    message: str = Field(description="what is wrong and what to change")


class RegisterRequest(Wire):
    kind: WorkerKind
    """The worker's kind; a worker token may register only its own kind."""
    name: Annotated[str, Field(pattern=ID_PATTERN, description="human-readable name, e.g. the host name")]
    restarts: Count = Field(0, description="how often a supervisor restarted this worker's process")
    last_error: Annotated[str, Field(max_length=500)] | None = Field(
        None, description="why this worker's previous process ended, as its supervisor saw it (shown in status)")
    request_id: RequestId | None = None
    """Client-generated id of this request, kept across retries: a retry gets the first reply and changes nothing."""


class RegisterResponse(Wire):
    worker_id: Id
    """The worker's id, issued by the coordinator: every later call names it."""
    lease_seconds: float
    """The lease lapses this long after the last call of this worker."""
    heartbeat_seconds: float
    """Renew the lease (heartbeat) at least this often."""
    max_wait_seconds: float = Field(description="longest a heartbeat long poll waits: a larger `wait` is capped to it")
    run_name: Id
    """The run's name (its directory under runs/ in the data directory)."""
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class HeartbeatResponse(Wire):
    lease_seconds: float
    """The lease now lasts this long from this reply."""
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class CollectorTask(Wire):
    kind: Literal["collector"] = "collector"
    """Task kind."""
    task_id: Id
    """The task's id, issued by the coordinator; chunk reports and payload paths name it."""
    env: EnvConfig
    """The environment: gymnasium id or entry point, kwargs, wrappers, solve threshold."""
    spaces: Spaces = Field(description="the env's spaces as the coordinator derived them; chunks follow them")
    behaviour: Behaviour = Field(description="how to act: the algorithm's action head and exploration")
    collector: CollectorConfig
    """Collector settings: envs per collector, steps per chunk, exploration schedule."""
    sampling: SamplingConfig
    """What the learner samples (unit, batch bounds, policy lag, on-policy sync)."""
    seed: int
    """Base seed of this claim's vector env (env i: seed + i); a fresh block per claim."""
    policy: PolicyRef | None
    """The latest policy when the task was claimed; null before the first publish."""
    lockstep: bool = Field(False, description="deterministic run: after each chunk, wait (however long) for the "
                                              "policy the learner trained on it")
    work: Literal["chunks", "members", "none"] = Field("chunks", description=(
        "chunks: collect chunks; members: evaluate members of the learner's generations (POST "
        "/v1/generations/claim) instead; none: the run trains on a recorded dataset, the collector may exit"))


class LearnerTask(Wire):
    kind: Literal["learner"] = "learner"
    """Task kind."""
    task_id: Id
    """The task's id, issued by the coordinator."""
    buffer_id: Id
    """The replay buffer to sample, issued by the coordinator (path parameter of /v1/buffers/{buffer_id})."""
    algo: AlgoConfig
    """The algorithm and its hyperparameters."""
    env: EnvConfig
    """The environment: gymnasium id or entry point, kwargs, wrappers, solve threshold."""
    spaces: Spaces
    """The env's observation and action spaces as the coordinator derived them."""
    behaviour: Behaviour
    """How collectors act (the head the learner must publish)."""
    learner: LearnerConfig = LearnerConfig()
    """Learner process settings (reports, checkpoints, hooks)."""
    deterministic: bool = False
    """Reproducible mode: lockstep with one collector."""
    replay: ReplayConfig
    """Replay buffer: capacity, warm-up, samples per insert, sampler, removers."""
    sampling: SamplingConfig
    """What the learner samples (unit, batch bounds, policy lag, on-policy sync)."""
    collector: CollectorConfig
    """Collector settings: envs per collector, steps per chunk, exploration schedule."""
    seed: int
    """Base seed for this task's environments and actors (shared/seeds.py)."""


class EvaluatorTask(Wire):
    kind: Literal["evaluator"] = "evaluator"
    """Task kind."""
    task_id: Id
    """The task's id, issued by the coordinator."""
    env: EnvConfig
    """The environment: gymnasium id or entry point, kwargs, wrappers, solve threshold."""
    spaces: Spaces
    """The env's observation and action spaces as the coordinator derived them."""
    evaluation: EvalConfig
    """Evaluation settings: episodes, envs, test episodes."""
    seed: int
    """Base seed for this task's environments and actors (shared/seeds.py)."""


Task = Annotated[CollectorTask | LearnerTask | EvaluatorTask, Field(discriminator="kind")]


class ClaimResponse(Wire):
    task: Task | None = Field(description="null when no task is available for this worker kind")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class EpisodeStat(Wire):
    ret: Return
    length: Annotated[int, Field(ge=1)]
    """Episode length in steps."""


class ChunkReport(Wire):
    chunk_id: Id
    """Generated by the collector, once per chunk, and kept across retries of its report (e.g. a uuid4 hex); names the
    payload file.
    """
    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    task_id: Id
    """The collector task the chunk was collected for (issued by the coordinator in the claim reply)."""
    payload_path: PayloadPath
    sha256: Sha256
    size_bytes: Annotated[int, Field(ge=1)]
    """Size of the payload file in bytes."""
    env_steps: Annotated[int, Field(ge=1, le=1_000_000)]
    """Rows in the payload: steps x num_envs."""
    num_envs: Annotated[int, Field(ge=1, le=4096, description="env columns; step t of env i is row t*num_envs+i")] = 1
    ends: Annotated[list[FlatIndex], Field(max_length=1_000_000, description=(
        "rows after which that env's episode does not continue (terminated, truncated or env error), ascending"))] = []
    fresh_columns: Annotated[list[Annotated[int, Field(ge=0, le=4095)]], Field(max_length=4096, description=(
        "env columns whose first row in this chunk begins an episode"))] = []
    episodes: Annotated[list[EpisodeStat], Field(max_length=100_000)] = []
    """Return and length of each episode that ended in this chunk (not those ended by an env error)."""
    policy_version: Count
    """The oldest policy version that acted in this chunk (0: random actions before the first policy)."""
    env_errors: Count = Field(0, description="steps on which an environment raised (excluded from training)")


class ChunkAck(Wire):
    chunk_id: Id
    """The reported chunk's id (generated by the collector)."""
    duplicate: bool = Field(description="true when this chunk id was already acknowledged; nothing changed")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class ChunkBatch(Wire):
    """Several chunk reports in one request: each is validated and acknowledged on its own terms."""

    reports: Annotated[list[ChunkReport], Field(min_length=1, max_length=64)]
    """1 to 64 chunk reports, each as for POST /v1/chunks."""


class ChunkVerdict(Wire):
    chunk_id: Id
    """The report's chunk id."""
    duplicate: bool = Field(description="true when this chunk id was already acknowledged; nothing changed")
    error: str | None = Field(None, description="why this report was refused (machine-readable); null if accepted")
    message: str | None = Field(None, description="what is wrong with this report and what to change")


class ChunkBatchAck(Wire):
    results: list[ChunkVerdict] = Field(description="one verdict per report, in request order")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class CorruptReport(Wire):
    """A learner found a sampled payload unusable (hash mismatch, undecodable, wrong shapes, unreadable)."""

    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    chunk_id: Id
    """The sampled chunk whose payload is unusable."""
    reason: Annotated[str, Field(min_length=1, max_length=500)]
    """What was wrong with the payload (hash mismatch, undecodable, shapes)."""


class CorruptAck(Wire):
    removed: bool = Field(description="true when the chunk was still in the buffer and has now been removed")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class SampleRequest(Wire):
    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    request_id: RequestId | None = None
    """Client-generated id of this request, kept across retries: a retry gets the first reply and changes nothing."""
    batch_size: Annotated[int, Field(ge=1, le=4096)]
    """Items per batch."""
    num_batches: Annotated[int, Field(ge=1, le=256)] = 1
    """Batches in this draw."""


class SampledChunk(Wire):
    chunk_id: Id
    """The chunk's id (generated by its collector)."""
    payload_path: PayloadPath
    sha256: Sha256
    policy_version: Count
    """The policy version that collected it."""
    num_envs: Annotated[int, Field(ge=1)]
    """Env columns of the payload."""


class SampleResponse(Wire):
    """Item references, columnar: item k is `lengths[k]` steps of one env column of chunks[chunk_index[k]],
    starting at flat row offsets[k] (= t * num_envs + env) and advancing num_envs rows per step. For
    unit=chunk an item is the whole chunk (offset 0, length = its rows). Batch b holds items b*B .. b*B+B-1."""

    unit: SamplingUnit
    """What one item is: transition, sequence, episode or chunk."""
    chunks: list[SampledChunk]
    """The chunks the items come from (read each payload once)."""
    chunk_index: list[int]
    """Per item: its chunk's index in `chunks`."""
    offsets: list[int]
    """Per item: flat row of its first step (t * num_envs + env)."""
    lengths: list[int]
    """Per item: steps."""
    ids: list[int] = Field(description="per item: its id, issued by the coordinator (never reused), for priority "
                                                  "updates")
    weights: list[float] = Field(description="importance weight per item (prioritized sampler; else all 1)")
    batch_size: int
    """Items per batch."""
    buffer_transitions: Count
    """Transitions in the buffer."""
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class PriorityUpdate(Wire):
    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    ids: Annotated[list[EntryId], Field(min_length=1, max_length=1_000_000)]
    """Item ids from a sample reply (issued by the coordinator)."""
    priorities: Annotated[list[Annotated[float, Field(ge=0, le=1e30)]], Field(min_length=1, max_length=1_000_000)]
    """New priority of each id, in order."""


class PriorityAck(Wire):
    updated: Count
    """Ids whose priority was set."""
    ignored: Count = Field(description="ids no longer in the buffer (evicted or removed since sampled)")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class LearnReport(Wire):
    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    iteration: Count
    """Learner updates so far."""
    losses: dict[Annotated[str, Field(pattern=ID_PATTERN)], float] = Field(default_factory=dict, max_length=64)
    """Latest value of each loss, by name."""
    transitions_trained: Count = Field(description="sampled transitions consumed since the learner started")
    hooks_failed: HooksFailed = Field(default_factory=dict)  # absent from learners of earlier releases


class PolicyPublish(Wire):
    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    policy: PolicyRef
    """The new version and its file, already written to the store."""
    iteration: Count
    """Learner updates behind this version."""


class Ack(Wire):
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class WorkerStatus(Wire):
    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    kind: WorkerKind
    """Collector, learner or evaluator."""
    name: str
    """The name the worker registered with."""
    task_id: str | None
    """The task it holds (issued by the coordinator)."""
    last_seen_seconds_ago: float
    """Seconds since its last call."""
    restarts: int = Field(description="how often a supervisor restarted this worker's process")
    buffered_chunks: int = Field(0, description=(
        "chunks this worker reported that are in the replay buffer now (acknowledged, not yet evicted or "
        "consumed): proof that a collector's data arrives"))
    last_error: str | None = Field(None, description=(
        "why its previous process ended, as reported at registration; kept in memory only (a restarted "
        "coordinator forgets it)"))
    corrupt_chunks: int = Field(0, description="payloads of this worker that a learner found unusable")
    flagged: bool = Field(False, description="too many corrupt payloads: its chunk reports are refused")


class TaskStatus(Wire):
    task_id: Id
    """The task's id, issued by the coordinator."""
    kind: WorkerKind
    """Worker kind the task is for."""
    state: Literal["pending", "claimed"]
    """Pending (free) or claimed."""
    worker_id: str | None
    """The worker holding it (issued by the coordinator)."""
    claims: int
    """How often it was claimed."""


class BufferStatus(Wire):
    buffer_id: Id
    """The buffer's id, issued by the coordinator (LearnerTask.buffer_id)."""
    sampler: str
    """The configured sampler: uniform, prioritized, fifo or lifo."""
    unit: SamplingUnit
    """What one sampled item is: transition, sequence, episode or chunk."""
    chunks: int
    """Chunks in the buffer now."""
    transitions: int
    """Transitions in the buffer now."""
    items: int = Field(description="sampleable items (transitions, sequence starts, episodes or chunks)")
    capacity_transitions: int
    """The ring's capacity in transitions."""
    evicted_chunks: int = Field(description="chunks whose every row was overwritten at capacity (FIFO)")
    removed_max_use: int = Field(description="items dropped after max_use samples")
    removed_stale: int = Field(description="chunks dropped for lagging the latest policy by > max_staleness")
    max_priority: float
    """The largest priority seen (new items enter with it)."""
    beta: float
    """Current importance-sampling exponent (prioritized sampler)."""
    inserted_transitions: int = Field(description="counted by the rate limiter (never decreases)")
    sampled_transitions: int
    """Transitions sampled so far, counted by the rate limiter."""
    samples_per_insert: float = Field(description="the configured target ratio")
    tolerance_transitions: int
    """How far the sample/insert ratio may drift before one side waits."""


class PolicyLagStatus(Wire):
    """Policy versions between the data and the latest policy: at ingest for every chunk, at sampling per item."""

    ingest_mean: float
    """Mean lag of chunks at ingest."""
    ingest_max: int
    """Largest lag of a chunk at ingest."""
    sampled_mean: float
    """Mean lag of sampled items."""
    sampled_max: int
    """Largest lag of a sampled item."""
    ingest_histogram: dict[str, int] = Field(description="chunks per lag; '8+' collects the tail")


class JournalStatus(Wire):
    commits: int = Field(description="SQLite transactions since the coordinator started")
    submissions: int = Field(description="journalled mutations since the coordinator started (group commit)")
    chunk_ids_remembered: int = Field(description="acknowledged chunk ids inside the idempotency window")


class LearnerRank(Wire):
    task_id: Id
    """One rank's learner task (learner-0 .. learner-N-1; torchrun assigns the ranks themselves)."""
    worker_id: str | None = Field(description="the learner holding it; null while pending (none, or its lease "
                                              "expired and the group is re-forming)")
    last_seen_seconds_ago: float | None = Field(description="seconds since that learner's last call")


class LearnerStatus(Wire):
    iteration: int
    """Learner updates so far."""
    transitions_trained: int
    """Sampled transitions the learner consumed."""
    losses: dict[str, float]
    """Latest value of each loss, by name."""
    samples_per_insert: float = Field(description="achieved ratio of sampled to inserted transitions")
    hooks_failed: HooksFailed = Field(default_factory=dict, description=(
        "learner hooks that raised during this run, each with its first error; the learner process it failed "
        "in switched it off"))
    world_size: int = Field(1, description="learner.replicas: the ranks of the learner group")
    ranks: list[LearnerRank] = Field(default_factory=list, description=(
        "each rank's learner task and its holder: a group trains only while every rank is held"))


class SeedsUsed(Wire):
    """The base seed of every vector env a mode used (env i of a block: base + i; shared/seeds.py)."""

    train: list[int] = Field(description="one block per collector task claim")
    valid: list[int] = Field(description="one block per validation")
    test: list[int] = Field(description="one block per held-out test")
    envs: dict[str, int] = Field(description="envs per block in each mode")


class Status(Wire):
    run_name: str
    """The run's name."""
    run_state: RunState
    """Running, or how the run ended: solved, budget_exhausted, stopped, failed."""
    run_message: str
    """Why the run ended, or empty while running."""
    coordinator_resumes: int = Field(description="how often the coordinator restarted and resumed this run")
    wall_seconds: float
    """Seconds the run has been running (downtime excluded)."""
    env_steps: int
    """Acknowledged env steps."""
    env_steps_per_second: float = Field(description="over the last few seconds")
    episodes: int
    """Episodes finished in acknowledged chunks."""
    chunks: int
    """Acknowledged chunks."""
    duplicate_chunks: int
    """Retried reports recognised and not counted again."""
    env_errors: int = Field(description="environment exceptions contained by collectors")
    corrupt_chunks: int = Field(0, description="chunks a learner found unusable and the coordinator removed")
    recent_return_mean: float | None = Field(description="mean training return over the last 100 episodes")
    policy_version: int
    """Latest published policy version (0: none yet)."""
    policy_lag: PolicyLagStatus
    """Policy lag of ingested and sampled data."""
    learner: LearnerStatus
    """The learner's latest report."""
    latest_evaluation: EvaluationResult | None
    """The latest validation."""
    best_evaluation: EvaluationResult | None
    """The best validation so far."""
    latest_test: HoldoutResult | None = None
    """The latest held-out test."""
    confirmed_by: HoldoutResult | None = Field(None, description="the held-out test that confirmed the solve")
    tests_rejected: int = Field(0, description="validation passes a held-out test did not confirm")
    test_in_flight: int | None = Field(None, description="policy version whose held-out test is running")
    seeds: SeedsUsed | None = None
    """The seed blocks each mode used."""
    control: ControlStatus | None = None
    """Operator commands and live setting changes (the control plane)."""
    population: PopulationStatus | None = None
    """Generations of a population-based learner (null for other algorithms)."""
    dataset: DatasetStatus | None = None
    """The recorded dataset a dataset run trains on, and the epoch being served (null for other runs)."""
    workers: list[WorkerStatus]
    """Every registered worker."""
    tasks: list[TaskStatus]
    """Every task."""
    buffers: list[BufferStatus]
    """Every replay buffer."""
    journal: JournalStatus
    """Journal (SQLite) counters."""


class RunResponse(Wire):
    run_name: str
    """The run's name."""
    run_state: RunState
    """Running, or how the run ended: solved, budget_exhausted, stopped, failed."""
    config: RunConfig
    """The run config with every default resolved."""


class SchemaInfo(Wire):
    name: str = Field(description="the schema's name in GET /v1/schemas/{name}: chunk or policy")
    version: int = Field(description="the contract's version; a file of another version is refused")
    title: str = Field(description="what the schema describes")
    url: str = Field(description="where the coordinator serves it, relative to its base URL")


class StopRequest(Wire):
    reason: Annotated[str, Field(max_length=500)] = "stopped by admin"
    """Why the run is stopped (shown in status)."""
