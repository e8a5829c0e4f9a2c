"""coordinator.state.control.Control without a Run: commands as counters, live settings validated against the
whole run config (refused whole), what each change marks, and its state through a real journal — and from a
journal written before the control plane existed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.control import Control
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from tests.support.components import JournalFor


@pytest.fixture
def control(run_config: RunConfig) -> Control:
    return Control(RunPlan.of(run_config).spec.live)


def test_commands_are_counters(control: Control) -> None:
    control.pause(True)
    control.checkpoint()
    control.evaluate(test=False)
    control.evaluate(test=True)
    status = control.status()
    assert (status.paused, status.checkpoints, status.evaluations, status.tests) == (True, 1, 2, 1)
    assert status.reproducible


def test_a_live_change_returns_the_changed_config_and_changes_nothing_yet(control: Control,
                                                                         run_config: RunConfig) -> None:
    changed = control.change(run_config, {"replay.samples_per_insert": 4.0}, "dqn")
    assert changed.replay.samples_per_insert == 4.0 and run_config.replay.samples_per_insert == 8.0
    assert control.changes == [] and not control.pending.dirty


def test_settings_that_are_not_live_are_refused_naming_the_live_ones(control: Control, run_config: RunConfig) -> None:
    with pytest.raises(Conflict, match="algo.gamma cannot change while dqn trains; its live settings: "
                                       "evaluation.every_versions"):
        control.change(run_config, {"algo.gamma": 0.9, "replay.samples_per_insert": 4.0}, "dqn")



def test_invalid_values_are_refused_naming_the_field(control: Control, run_config: RunConfig) -> None:
    with pytest.raises(Invalid, match="replay.samples_per_insert"):
        control.change(run_config, {"replay.samples_per_insert": -1.0}, "dqn")


def test_a_recorded_change_marks_the_run_not_reproducible(control: Control, run_config: RunConfig) -> None:
    changed = control.change(run_config, {"replay.samples_per_insert": 4.0}, "dqn")
    control.record(run_config, changed, {"replay.samples_per_insert": 4.0}, env_steps=500, wall_seconds=12.0)
    (change,) = control.status().changes
    assert (change.key, change.old, change.new, change.env_steps) == ("replay.samples_per_insert", 8.0, 4.0, 500)
    assert not control.status().reproducible and control.pending.dirty


def test_every_command_marks_the_state_and_reading_does_not(control: Control) -> None:
    for command in (lambda: control.pause(True), control.checkpoint, lambda: control.evaluate(test=True)):
        control.pending.clear()
        command()
        assert control.pending.dirty and control.pending.rows == []
    control.pending.clear()
    control.status()
    assert not control.pending.dirty


def test_commands_and_changes_survive_a_round_trip(control: Control, run_config: RunConfig, tmp_path: Path) -> None:
    journal = JournalFor(tmp_path / "journal.sqlite", control)
    control.pause(True)
    control.evaluate(test=True)
    changed = control.change(run_config, {"evaluation.every_versions": 3}, "dqn")
    control.record(run_config, changed, {"evaluation.every_versions": 3}, env_steps=10, wall_seconds=1.0)
    journal.commit()
    restored = journal.restore(Control(control.live), now=0.0)
    assert restored.status() == control.status()


def test_a_journal_from_before_the_control_plane_loads_as_a_fresh_one(control: Control) -> None:
    control.load_state_dict(Stored(), now=0.0)
    assert control.status() == Control(control.live).status()
