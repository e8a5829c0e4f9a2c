"""Pydantic models of every REST request and response: the only thing services share.

Requests forbid unknown fields and reject NaN/inf, so a malformed report is a 422 at the door instead of a
corrupted counter later. Responses are the same models, so the OpenAPI document is complete.

Each model lives with what it belongs to (wire_tasks: registry and tasks; wire_chunks: the data plane;
wire_status: status; wire_control, wire_evaluations, wire_generations, wire_datasets: those components);
this module holds the few that belong to no one part, and re-exports all of them, so services import every
wire model and field type from here.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shared.config import RunConfig
from shared.hooks import HooksFailed
from shared.ids import ID_PATTERN
from shared.wire_base import (
    Count,
    Directive,
    EntryId,
    FlatIndex,
    Id,
    PayloadPath,
    PolicyRef,
    RequestId,
    Return,
    RunState,
    Sha256,
    Wire,
    WorkerKind,
)
from shared.wire_battles import BattleRecord, OpponentPool, SelfPlayStatus, Tally
from shared.wire_chunks import (
    ChunkAck,
    ChunkBatch,
    ChunkBatchAck,
    ChunkReport,
    ChunkVerdict,
    CorruptAck,
    CorruptReport,
    EpisodeStat,
    PriorityAck,
    PriorityUpdate,
    SampledChunk,
    SampleRequest,
    SampleResponse,
)
from shared.wire_control import ControlStatus, EvaluateRequest, SettingChange, SettingsRequest
from shared.wire_datasets import DatasetStatus
from shared.wire_evaluations import EvaluationReport, EvaluationResult, HoldoutReport, HoldoutResult, Seed
from shared.wire_generations import PopulationStatus
from shared.wire_status import (
    BufferStatus,
    JournalStatus,
    LearnerRank,
    LearnerStatus,
    PolicyLagStatus,
    SeedsUsed,
    Status,
    TaskStatus,
    WorkerStatus,
)
from shared.wire_tasks import (
    ClaimResponse,
    CollectorTask,
    EvaluatorTask,
    HeartbeatResponse,
    LearnerTask,
    RegisterRequest,
    RegisterResponse,
    Task,
)

__all__ = [
    "Ack",
    "BattleRecord",
    "OpponentPool",
    "SelfPlayStatus",
    "Tally",
    "BufferStatus",
    "ChunkAck",
    "ChunkBatch",
    "ChunkBatchAck",
    "ChunkReport",
    "ChunkVerdict",
    "ClaimResponse",
    "CollectorTask",
    "ControlStatus",
    "CorruptAck",
    "CorruptReport",
    "Count",
    "DatasetStatus",
    "Directive",
    "EntryId",
    "EpisodeStat",
    "ErrorBody",
    "EvaluateRequest",
    "EvaluationReport",
    "EvaluationResult",
    "EvaluatorTask",
    "FlatIndex",
    "HeartbeatResponse",
    "HoldoutReport",
    "HoldoutResult",
    "Id",
    "JournalStatus",
    "LearnReport",
    "LearnerRank",
    "LearnerStatus",
    "LearnerTask",
    "PayloadPath",
    "PolicyLagStatus",
    "PolicyPublish",
    "PolicyRef",
    "PopulationStatus",
    "PriorityAck",
    "PriorityUpdate",
    "RegisterRequest",
    "RegisterResponse",
    "RequestId",
    "Return",
    "RunResponse",
    "RunState",
    "SampleRequest",
    "SampleResponse",
    "SampledChunk",
    "SchemaInfo",
    "Seed",
    "SeedsUsed",
    "SettingChange",
    "SettingsRequest",
    "Sha256",
    "Status",
    "StopRequest",
    "Task",
    "TaskStatus",
    "Wire",
    "WorkerKind",
    "WorkerStatus",
]


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
