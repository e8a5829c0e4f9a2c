"""Wire models that belong to no one part of the coordinator: errors, acknowledgements, the run, learner
reports and policy publications, schema listings and the stop request."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rlfleet.shared.config.hooks import HooksFailed
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.ids import ID_PATTERN
from rlfleet.shared.wire.base import Count, Directive, Id, PolicyRef, RunState, Wire


class ErrorBody(Wire):
    error: str = Field(description="machine-readable error code")
    message: str = Field(description="what is wrong and what to change")


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
