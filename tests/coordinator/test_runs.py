"""coordinator/runs.py: which run a starting coordinator serves (resume the newest while it runs, else a new one)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.journal.database import Journal, stored_run_state
from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.runs import choose_run
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout, new_run_name
from tests.support.api import auth
from tests.support.configs import small_run_config

NOON = time.mktime((2026, 11, 24, 12, 0, 0, 0, 0, -1))  # local time, as run names use


def _journal(data_dir: Path, name: str, state: str | None) -> None:
    """A run directory whose journal holds `state` (None: a journal nothing was committed to)."""
    journal = Journal(RunLayout(data_dir, name).journal)
    if state is not None:
        journal.submit([], {"lifecycle": {"state": state, "message": "", "elapsed": 1.0, "ended_elapsed": None,
                                          "resumes": 0}}).result()
    journal.close()


def test_new_run_name_has_config_seed_and_local_start_time() -> None:
    base = small_run_config().model_copy(update={"seed": 7})
    assert new_run_name(base, NOON) == "test-run__s7__20261124-120000"


def test_stored_run_state_reads_the_lifecycle(tmp_path: Path) -> None:
    assert stored_run_state(tmp_path / "missing.sqlite") is None
    _journal(tmp_path, "empty", None)
    assert stored_run_state(RunLayout(tmp_path, "empty").journal) is None
    _journal(tmp_path, "done", "solved")
    assert stored_run_state(RunLayout(tmp_path, "done").journal) == "solved"


def test_first_run_of_a_config_is_new(tmp_path: Path) -> None:
    choice = choose_run(tmp_path, small_run_config(), now=NOON)
    assert choice.name == "test-run__s0__20261124-120000"
    assert "a new run: no run test-run__s0__*" in choice.why


@pytest.mark.parametrize("state", ["running", None])
def test_newest_run_still_running_is_resumed(tmp_path: Path, state: str | None) -> None:
    _journal(tmp_path, "test-run__s0__20261124-100000", "solved")
    _journal(tmp_path, "test-run__s0__20261124-110000", state)
    choice = choose_run(tmp_path, small_run_config(), now=NOON)
    assert choice.name == "test-run__s0__20261124-110000"
    assert choice.why.startswith("resuming run test-run__s0__20261124-110000")


@pytest.mark.parametrize("state", ["solved", "stopped", "budget_exhausted"])
def test_newest_run_finished_starts_a_new_one(tmp_path: Path, state: str) -> None:
    _journal(tmp_path, "test-run__s0__20261124-100000", "running")  # older: never resumed again
    _journal(tmp_path, "test-run__s0__20261124-110000", state)
    choice = choose_run(tmp_path, small_run_config(), now=NOON)
    assert choice.name == "test-run__s0__20261124-120000"
    assert f"test-run__s0__20261124-110000, is {state}" in choice.why


def test_other_configs_seeds_and_names_are_not_this_configs_runs(tmp_path: Path) -> None:
    for name in ("test-run__s1__20261124-110000", "other__s0__20261124-110000", "test-run__s0__latest",
                 "test-run"):
        _journal(tmp_path, name, "running")
    assert choose_run(tmp_path, small_run_config(), now=NOON).name == "test-run__s0__20261124-120000"


def test_a_new_run_in_the_same_second_gets_a_counter(tmp_path: Path) -> None:
    _journal(tmp_path, "test-run__s0__20261124-120000", "solved")
    second = choose_run(tmp_path, small_run_config(), now=NOON)
    assert second.name == "test-run__s0__20261124-120000-2"
    _journal(tmp_path, second.name, "running")
    assert choose_run(tmp_path, small_run_config(), now=NOON).name == second.name  # newest: the counter counts


def test_explicit_name_is_used_as_given(tmp_path: Path) -> None:
    _journal(tmp_path, "mine", "solved")
    assert choose_run(tmp_path, small_run_config(), "mine").name == "mine"
    assert "resuming it" in choose_run(tmp_path, small_run_config(), "mine").why
    assert "a new run" in choose_run(tmp_path, small_run_config(), "fresh").why


def _settings(coordinator_settings: CoordinatorSettings, **update: object) -> CoordinatorSettings:
    return coordinator_settings.model_copy(update={"run": None, **update})


def _run_name(settings: CoordinatorSettings, tokens: dict[str, str], stop: bool = False) -> str:
    with TestClient(create_app(settings)) as client:
        name = client.get("/v1/run", headers=auth(tokens["read"])).json()["run_name"]
        if stop:
            assert client.post("/v1/run/stop", headers=auth(tokens["admin"]), json={}).status_code == 200
    return str(name)


def test_coordinator_resumes_a_running_run_and_follows_a_finished_one(
        coordinator_settings: CoordinatorSettings, tokens: dict[str, str], run_config: RunConfig) -> None:
    """What compose does: restarting the coordinator resumes; after the run ended, a restart trains anew."""
    settings = _settings(coordinator_settings)
    first = _run_name(settings, tokens)
    assert first.startswith(f"{run_config.name}__s{run_config.seed}__")
    assert _run_name(settings, tokens, stop=True) == first  # still running: resumed, then stopped
    time.sleep(1.05)  # a new second: the new run's name is the plain one, no counter
    second = _run_name(settings, tokens)
    assert second != first and second.startswith(f"{run_config.name}__s{run_config.seed}__")
    assert stored_run_state(RunLayout(settings.data_dir, first).journal) == "stopped"
    assert _run_name(_settings(coordinator_settings, run=first), tokens) == first  # RLFLEET_RUN: exactly that run


def test_explicit_run_and_name_override_must_agree(coordinator_settings: CoordinatorSettings) -> None:
    assert CoordinatorSettings(run="").run is None  # compose's `${RLFLEET_RUN:-}` when unset
    with pytest.raises(ValueError, match="name different runs"):
        create_app(coordinator_settings.model_copy(update={"run": "a", "overrides": "name=b"}))
    named = coordinator_settings.model_copy(update={"run": None, "overrides": "name=b"})
    with TestClient(create_app(named)) as client:
        assert client.app.state.run.ctx.config.name == "b"  # type: ignore[attr-defined]


def test_a_stopped_run_named_explicitly_continues_and_its_stop_does_not_count_as_wall_time(
        coordinator_settings: CoordinatorSettings, tokens: dict[str, str]) -> None:
    """`rlfleet up --resume` of a stopped run (the control plane's stop) trains on; an automatic choice, or a
    solved run, does not."""
    settings = _settings(coordinator_settings)
    first = _run_name(settings, tokens, stop=True)
    assert stored_run_state(RunLayout(settings.data_dir, first).journal) == "stopped"
    with TestClient(create_app(_settings(coordinator_settings, run=first))) as client:
        run = client.get("/v1/status", headers=auth(tokens["read"])).json()
        assert (run["run_name"], run["run_state"]) == (first, "running")
        assert run["run_message"] == "training (resumed after a stop)"


def test_lifecycle_reopens_only_a_stopped_run_and_keeps_its_wall_clock() -> None:
    from rlfleet.coordinator.state.lifecycle import Lifecycle
    from rlfleet.shared.config.run_config import BudgetConfig

    life = Lifecycle(BudgetConfig(), clock=lambda: 100.0)
    assert not life.reopen(150.0)  # running
    life.end("stopped", "operator", 130.0)
    assert life.reopen(1000.0) and life.running and life.wall_seconds(1010.0) == pytest.approx(40.0)
    life.end("solved", "confirmed", 1020.0)
    assert not life.reopen(2000.0) and life.state == "solved"
