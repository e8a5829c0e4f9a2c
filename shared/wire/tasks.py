"""Wire models of the worker registry: registration, leases (heartbeats) and the task each kind of worker claims.

Re-exported by shared/wire/__init__.py, which services import every wire model from."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlfleet.shared.algorithms import AlgoConfig
from rlfleet.shared.config.battle import SelfPlayConfig
from rlfleet.shared.config.run_config import CollectorConfig, EnvConfig, EvalConfig, LearnerConfig, ReplayConfig, SamplingConfig
from rlfleet.shared.ids import ID_PATTERN
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.wire.base import Count, Directive, Id, PolicyRef, RequestId, Wire, WorkerKind
from rlfleet.shared.wire.limits import MAX_BODY_BYTES


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
    self_play: SelfPlayConfig | None = Field(None, description=(
        "two-player games: each game's opponent is drawn from the coordinator's pool (GET /v1/policies/opponents)"))
    max_body_bytes: Annotated[int, Field(ge=1024, description=(
        "the coordinator's request body limit (larger bodies get 413): a batch of chunk reports is split into "
        "requests below it"))] = MAX_BODY_BYTES


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
    """Base seed for this task's environments and actors (shared/envs/seeds.py)."""


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
    """Base seed for this task's environments and actors (shared/envs/seeds.py)."""
    self_play: SelfPlayConfig | None = Field(None, description=(
        "two-player games: each validation also plays sampled versions of the opponent pool"))


Task = Annotated[CollectorTask | LearnerTask | EvaluatorTask, Field(discriminator="kind")]


class ClaimResponse(Wire):
    task: Task | None = Field(description="null when no task is available for this worker kind")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""
