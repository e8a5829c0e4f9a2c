"""coordinator.state.lifecycle.Lifecycle: running until solved, out of budget or stopped (the first reason
stands), a stopped run reopened without counting its stop, and wall-clock time carried across a restart."""

from __future__ import annotations

from pathlib import Path

from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.lifecycle import Lifecycle
from rlfleet.shared.config.run_config import BudgetConfig
from tests.support.components import JournalFor
from tests.support.run import FakeClock

BUDGET = BudgetConfig(max_env_steps=1_000, max_wall_seconds=600)


def test_the_first_reason_to_end_stands() -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    assert life.running and life.end("solved", "confirmed", clock())
    assert not life.end("stopped", "operator", clock()) and (life.state, life.message) == ("solved", "confirmed")


def test_each_budget_names_itself_once_used_up() -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    assert life.budget_used(999, clock()) is None
    assert life.budget_used(1_000, clock()) == "env-step budget of 1000 used up"
    clock.advance(600)
    assert life.budget_used(0, clock()) == "wall-clock budget of 600s used up"
    assert life.state == "running"  # ending is the caller's (coordinator/operations/budget.py)


def test_a_run_waiting_for_its_end_of_budget_test_runs_but_no_longer_trains(tmp_path: Path) -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    journal = JournalFor(tmp_path / "journal.sqlite", life)
    life.finish("env-step budget of 1000 used up", "testing the best policy before the run ends")
    assert life.running and not life.training and "testing the best policy" in life.message
    assert life.budget_used(5_000, clock()) is None  # its budget was found used up once
    journal.commit()
    restored = journal.restore(Lifecycle(BUDGET, clock), now=clock())
    assert (restored.running, restored.training, restored.final) == (True, False, "env-step budget of 1000 used up")
    assert restored.end("budget_exhausted", "tested", clock()) and not restored.running


def test_only_a_stopped_run_reopens_and_its_stop_does_not_count() -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    clock.advance(100)
    life.end("stopped", "for today", clock())
    clock.advance(5_000)
    assert life.wall_seconds(clock()) == 100
    assert life.resumed(reopen=True) and life.running and life.resumes == 1
    assert life.wall_seconds(clock()) == 100
    solved = Lifecycle(BUDGET, clock)
    solved.end("solved", "confirmed", clock())
    assert not solved.resumed(reopen=True) and solved.state == "solved" and solved.resumes == 1
    assert not Lifecycle(BUDGET, clock).reopen(clock())  # a running run has nothing to reopen


def test_a_larger_budget_frees_an_exhausted_run_without_counting_its_time_ended() -> None:
    """The Pong run on the lent GPU ran out of its 430 s climbing (validation +5.1); resumed with more time it
    trains on from where it ended, its time ended not counted. A budget that leaves no room frees nothing."""
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    clock.advance(600)
    reason = life.budget_used(400, clock())
    assert reason == "wall-clock budget of 600s used up"
    life.end("budget_exhausted", reason, clock())
    clock.advance(3_000)  # ended meanwhile
    same = journal_round_trip(life, BUDGET, clock)
    assert not same.extend(400, clock()) and same.state == "budget_exhausted"  # the same budget: nothing to train
    more = journal_round_trip(life, BudgetConfig(max_env_steps=1_000, max_wall_seconds=1_200), clock)
    assert more.extend(400, clock()) and more.running and more.training and more.ended is None
    assert more.message == "training (resumed with a larger budget)" and more.wall_seconds(clock()) == 600
    clock.advance(599)
    assert more.budget_used(400, clock()) is None
    clock.advance(1)
    assert more.budget_used(400, clock()) == "wall-clock budget of 1200s used up"
    steps_spent = journal_round_trip(life, BudgetConfig(max_env_steps=400, max_wall_seconds=1_200), clock)
    assert not steps_spent.extend(400, clock())  # more time, but its env steps are used up


def test_a_larger_budget_lets_a_run_waiting_for_its_end_of_budget_test_train_again() -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    life.finish(life.budget_used(1_000, clock()) or "", "testing the best policy before the run ends")
    assert life.running and not life.training
    more = journal_round_trip(life, BudgetConfig(max_env_steps=5_000, max_wall_seconds=600), clock)
    assert more.extend(1_000, clock()) and more.training and more.final is None


def test_a_larger_budget_leaves_solved_stopped_and_running_runs_as_they_are() -> None:
    clock = FakeClock()
    larger = BudgetConfig(max_env_steps=10_000, max_wall_seconds=6_000)
    for state in ("solved", "stopped", "failed"):
        life = Lifecycle(BUDGET, clock)
        life.end(state, "ended", clock())
        again = journal_round_trip(life, larger, clock)
        assert not again.extend(0, clock()) and again.state == state
    assert not Lifecycle(larger, clock).extend(0, clock())  # running and training: nothing to free


def journal_round_trip(life: Lifecycle, budget: BudgetConfig, clock: FakeClock) -> Lifecycle:
    """`life` as a restarted coordinator reads it back, built with `budget`."""
    restored = Lifecycle(budget, clock)
    restored.load_state_dict(Stored(meta=life.state_dict(), rows={}), clock())
    return restored


def test_every_change_and_every_budget_check_marks_the_state() -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    assert not life.pending.dirty
    life.budget_used(0, clock())  # time passed: the elapsed time is journalled with the operation
    assert life.pending.dirty
    life.pending.clear()
    life.end("stopped", "x", clock())
    assert life.pending.dirty
    life.pending.clear()
    life.end("solved", "too late", clock())
    assert not life.pending.dirty  # nothing changed
    life.wall_seconds(clock())
    assert not life.pending.dirty and life.pending.rows == []


def test_state_and_elapsed_time_survive_a_round_trip_and_downtime_does_not_count(tmp_path: Path) -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    journal = JournalFor(tmp_path / "journal.sqlite", life)
    clock.advance(40)
    life.resumed(reopen=False)
    life.budget_used(10, clock())
    journal.commit()
    later = FakeClock(clock() + 3_600)  # a restart an hour later
    restored = journal.restore(Lifecycle(BUDGET, later), now=later())
    assert restored.wall_seconds(later()) == 40 and (restored.state, restored.resumes) == ("running", 1)
    assert restored.state_dict() == life.state_dict()


def test_an_ended_run_keeps_its_end_across_a_round_trip(tmp_path: Path) -> None:
    clock = FakeClock()
    life = Lifecycle(BUDGET, clock)
    journal = JournalFor(tmp_path / "journal.sqlite", life)
    clock.advance(30)
    life.end("stopped", "done for today", clock())
    clock.advance(30)
    journal.commit()
    restored = journal.restore(Lifecycle(BUDGET, clock), now=clock() + 100)
    assert (restored.state, restored.message, restored.wall_seconds(clock() + 500)) == ("stopped", "done for today",
                                                                                        30)
    assert restored.reopen(clock()) and restored.wall_seconds(clock()) == 30
