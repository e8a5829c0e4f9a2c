"""Wire models of the control plane: operator commands, live setting changes and what status shows of them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from rlfleet.shared.wire.base import Count, Wire


class SettingChange(Wire):
    key: str = Field(description="dotted run-config path, e.g. replay.samples_per_insert")
    old: Any = Field(description="the value before the change")
    new: Any = Field(description="the value after the change")
    env_steps: Count = Field(description="the run's env steps when the change was made")
    wall_seconds: float = Field(description="the run's wall-clock seconds when the change was made")


class ControlStatus(Wire):
    paused: bool = Field(description="collection paused by an operator")
    checkpoints: Count = Field(description="checkpoints asked for by an operator")
    evaluations: Count = Field(description="evaluations asked for by an operator")
    tests: Count = Field(description="held-out tests asked for by an operator")
    changes: list[SettingChange] = Field(description="live setting changes, oldest first")
    live_settings: list[str] = Field(description="the settings this run's algorithm lets an operator change")
    reproducible: bool = Field(description="false once anything was changed by hand: the run cannot be replayed")


class SettingsRequest(Wire):
    settings: Annotated[dict[str, Any], Field(min_length=1, max_length=16, description=(
        "dotted run-config paths and their new values, e.g. {\"replay.samples_per_insert\": 16}"))]


class EvaluateRequest(Wire):
    test: bool = Field(False, description="also run the held-out test of the version validated, whatever its score")
