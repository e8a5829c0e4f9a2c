"""Wire models of the control plane: operator commands, live setting changes and what status shows of them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from rlfleet.shared.wire.base import Count, RequestId, Wire


class SettingChange(Wire):
    key: str = Field(description="dotted run-config path, e.g. replay.samples_per_insert")
    old: Any = Field(description="the value before the change")
    new: Any = Field(description="the value after the change")
    env_steps: Count = Field(description="the run's env steps when the change was made")
    wall_seconds: float = Field(description="the run's wall-clock seconds when the change was made")


class CheckpointLoad(Wire):
    load_id: str = Field(description="the request id that asked for it (a retry with it changes nothing)")
    source: str = Field(description="the source run's directory, resolved")
    checkpoint: str = Field(description="the source's checkpoint file loaded, e.g. learner-0000000500.pt")
    source_iteration: Count = Field(description="the source learner's iteration when it wrote the checkpoint")
    source_env_steps: Count = Field(description="the source run's env steps when the checkpoint was written")
    env_steps: Count = Field(description="this run's env steps when the load was asked for")
    wall_seconds: float = Field(description="this run's wall-clock seconds when the load was asked for")


class ControlStatus(Wire):
    paused: bool = Field(description="collection paused by an operator")
    checkpoints: Count = Field(description="checkpoints asked for by an operator")
    evaluations: Count = Field(description="evaluations asked for by an operator")
    tests: Count = Field(description="held-out tests asked for by an operator")
    changes: list[SettingChange] = Field(description="live setting changes, oldest first")
    live_settings: list[str] = Field(description="the settings this run's algorithm lets an operator change")
    loads: list[CheckpointLoad] = Field([], description=(
        "checkpoints loaded from other runs, oldest first; the learner continues from the last"))
    load_refusals: Count = Field(0, description=(
        "checkpoint loads refused because the checkpoint does not fit this run (algorithm, spaces, network)"))
    reproducible: bool = Field(description="false once anything was changed by hand: the run cannot be replayed")


class SettingsRequest(Wire):
    settings: Annotated[dict[str, Any], Field(min_length=1, max_length=16, description=(
        "dotted run-config paths and their new values, e.g. {\"replay.samples_per_insert\": 16}"))]


class EvaluateRequest(Wire):
    test: bool = Field(False, description="also run the held-out test of the version validated, whatever its score")


class LoadCheckpointRequest(Wire):
    request_id: RequestId
    source: str = Field(min_length=1, max_length=4096, description=(
        "the source run's directory (<data dir>/runs/<run>), which must lie under one of the coordinator's "
        "checkpoint sources (RLFLEET_CHECKPOINT_SOURCES; by default its own data directory)"))
    checkpoint: str | None = Field(None, pattern=r"^learner-\d{10}\.pt$", description=(
        "one of the source's checkpoints; null: its latest"))
