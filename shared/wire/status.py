"""Wire models of GET /v1/status: the run, its workers, tasks, buffers, learner group and journal at a glance.

Re-exported by shared/wire/__init__.py, which services import every wire model from."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlfleet.shared.config.hooks import HooksFailed
from rlfleet.shared.config.run_config import SamplingUnit
from rlfleet.shared.wire.base import Id, RunState, Wire, WorkerKind
from rlfleet.shared.wire.battles import SelfPlayStatus
from rlfleet.shared.wire.control_plane import ControlStatus
from rlfleet.shared.wire.dataset_batches import DatasetStatus
from rlfleet.shared.wire.evaluations import EvaluationResult, HoldoutResult, SolveRule
from rlfleet.shared.wire.generations import PopulationStatus


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
    """The base seed of every vector env a mode used (env i of a block: base + i, or one generator seeded base
    for an env's own vectorized implementation; shared/envs/seeds.py)."""

    train: list[int] = Field(description="one block per collector task claim")
    valid: list[int] = Field(description="one block per validation")
    test: list[int] = Field(description="one block per held-out test")
    envs: dict[str, int] = Field(description="envs per block in each mode")


class TrackerStatus(Wire):
    """One experiment tracker of the run's `tracking` section (coordinator/observe/tracking.py)."""

    name: Literal["wandb", "mlflow"]
    """The tracker."""
    state: Literal["starting", "running", "finished", "failed"]
    """failed: it raised and was switched off for the rest of this coordinator's life; the run goes on."""
    error: str | None = Field(None, description="what it raised, in one line, once failed")
    written: int = Field(description="scalars it has written")
    dropped: int = Field(description=(
        "scalars dropped because its queue was full (tracking.queue_events) or it had failed"))


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
    payload_bytes_per_env_step: float | None = Field(None, description=(
        "mean payload file bytes per acknowledged env step (null before the first chunk): what the run's data "
        "costs the store and the learner's reads; a frame-stacked image run stores each frame once (compact "
        "chunks), zstd-compressed by default"))
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
    solve_rule: SolveRule = Field("retest_lower_bound_95", description=(
        "how a held-out test confirms a solve in this run: `retest_lower_bound_95` (the 95% lower prediction bound "
        "of an independent re-test's mean reaches env.solve_threshold) or `against` (two-player games: every bar "
        "of evaluation.against)"))
    tests_rejected: int = Field(0, description="validation passes a held-out test did not confirm")
    test_in_flight: int | None = Field(None, description="policy version whose held-out test is running")
    no_threshold: bool = Field(False, description=(
        "the run has no threshold (env.solve_threshold null, no battle rule): it is never solved, it trains to its "
        "budget, keeps the best validated policy (best_evaluation, in best/) and the last (policy_version), and "
        "tests the best before it ends; ending on its budget is its success. Its tests show a score, not a verdict"))
    seeds: SeedsUsed | None = None
    """The seed blocks each mode used."""
    control: ControlStatus | None = None
    """Operator commands and live setting changes (the control plane)."""
    population: PopulationStatus | None = None
    """Generations of a population-based learner (null for other algorithms)."""
    dataset: DatasetStatus | None = None
    """The recorded dataset a dataset run trains on, and the epoch being served (null for other runs)."""
    self_play: SelfPlayStatus | None = None
    """The opponent pool, training games by opponent and Elo ratings (null unless the run sets self_play)."""
    workers: list[WorkerStatus]
    """Every registered worker."""
    tasks: list[TaskStatus]
    """Every task."""
    buffers: list[BufferStatus]
    """Every replay buffer."""
    journal: JournalStatus
    """Journal (SQLite) counters."""
    trackers: list[TrackerStatus] = Field(default_factory=list, description=(
        "the experiment trackers the run config's `tracking` section turns on (W&B, MLflow); empty without"))
