"""Held-out confirmation: validations nominate, one test at a time decides, rejections are counted. Through a Run
first (the evaluations operations over the judge), then the Judge component alone: what it marks, and its
validations, tests and pending request through a real journal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.state.judge import Judge
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import BattleRecord, EvaluationReport, HoldoutReport, HoldoutResult
from tests.support.components import JournalFor
from tests.support.run import FakeClock, evaluate, holdout, learner, publish, register

PASS, FAIL = [480.0] * 4, [400.0] * 100  # small_run_config: 4 validation episodes, threshold 475


def setup(run: Run, store: LocalStore, versions: int = 3) -> str:
    lrn = learner(run)
    for version in range(1, versions + 1):
        publish(run, store, lrn, version)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    return ev


def test_a_rejected_candidate_keeps_the_run_going_and_only_a_better_one_is_tested_next(
        run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    rejected = holdout(run, ev, 1, FAIL)
    assert not rejected.confirmed and rejected.validation_mean == 480.0
    assert run.ctx.lifecycle.state == "running" and run.status().tests_rejected == 1
    # measured by its test (400), the rejected candidate is beaten by any passing validation: a lucky
    # validation cannot lock later candidates out
    assert evaluate(run, ev, 2, PASS).test_requested
    assert not holdout(run, ev, 2, [470.0] * 100).confirmed
    assert evaluate(run, ev, 3, [490.0] * 4).test_requested
    assert holdout(run, ev, 3, [476.0] * 100).confirmed
    status = run.status()
    assert status.run_state == "solved" and status.confirmed_by is not None
    assert (status.confirmed_by.policy_version, status.tests_rejected) == (3, 2)


def test_a_rejected_spread_out_test_bars_later_candidates_by_its_bound_not_its_mean(run: Run,
                                                                                     store: LocalStore) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, [500.0] * 4).test_requested
    spread = holdout(run, ev, 1, [400.0, 580.0] * 50)
    assert (spread.mean, spread.confirmed, spread.bound) == (490.0, False, pytest.approx(468.8, abs=0.05))
    # a steadier policy validated below that mean (485 < 490) but above its bound is still tested, and confirms
    assert evaluate(run, ev, 2, [485.0] * 4).test_requested
    assert holdout(run, ev, 2, [484.0, 486.0] * 50).confirmed


def test_a_test_above_the_threshold_confirms_only_when_a_retest_would_hold_too(run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    # mean 480, sample std 50.25: 480 - 1.66039·50.25·√(2/100) = 468.2 < 475, though the mean clears 475
    spread = holdout(run, ev, 1, [430.0, 530.0] * 50)
    assert spread.mean == 480.0 and not spread.confirmed and run.ctx.lifecycle.state == "running"
    assert (spread.rule, spread.bound) == ("retest_lower_bound_95", pytest.approx(468.2, abs=0.05))
    assert spread.std == pytest.approx(50.2519, abs=1e-4)  # ddof=1
    assert spread.ci95 == pytest.approx((480 - 1.98422 * 5.02519, 480 + 1.98422 * 5.02519), abs=1e-4)  # Student's t
    assert evaluate(run, ev, 2, [490.0] * 4).test_requested
    tight = holdout(run, ev, 2, [485.0, 495.0] * 50)  # std 5.03: bound 488.8
    assert tight.confirmed and tight.bound == pytest.approx(490 - 1.66039 * 5.02519 * 0.141421, abs=1e-3)
    message = run.status().run_message
    assert "re-test lower bound 488.8 >= threshold 475" in message and "95% t interval 489.0 .. 491.0" in message


def test_results_journalled_before_the_rule_was_recorded_load_with_the_rule_they_used() -> None:
    old = {"policy_version": 3, "mean": 480.0, "std": 1.0, "ci95": [479.8, 480.2], "episodes": 100,
           "validation_mean": 490.0, "env_steps": 1000, "wall_seconds": 5.0, "confirmed": True}
    assert (HoldoutResult.model_validate(old).rule, HoldoutResult.model_validate(old).bound) == (
        "mean_at_threshold", None)
    battle = {**old, "battles": [{"opponent": "random", "wins": 1, "draws": 0, "losses": 0}]}
    assert HoldoutResult.model_validate(battle).rule == "against"


def test_at_most_one_test_is_in_flight(run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    assert not evaluate(run, ev, 2, [499.0] * 4).test_requested  # better, but v1's test is still running
    assert run.status().test_in_flight == 1
    with pytest.raises(Conflict, match="no held-out test of policy v2 was requested"):
        holdout(run, ev, 2, [500.0] * 100)


def test_a_dead_evaluator_does_not_block_tests_forever(run: Run, store: LocalStore, clock: FakeClock) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    clock.advance(run.ctx.fleet.lease_seconds + 1)
    run.tick()  # its lease expires mid-test
    successor = register(run, "evaluator")
    run.workers.claim(successor)
    assert evaluate(run, successor, 1, PASS).test_requested


def test_a_test_must_hold_test_episodes_and_a_retry_counts_once(run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    evaluate(run, ev, 1, PASS)
    with pytest.raises(Invalid, match="evaluation.test_episodes=100"):
        holdout(run, ev, 1, [500.0] * 10)
    first = holdout(run, ev, 1, FAIL, request_id="t-1")
    assert holdout(run, ev, 1, FAIL, request_id="t-1") == first
    assert run.status().tests_rejected == 1


def test_tests_and_the_pending_request_survive_a_restart(tmp_path: Path, run_config: RunConfig,
                                                         store: LocalStore) -> None:
    clock = FakeClock()
    run = Run(run_config, store, clock=clock, sample_wait_seconds=0, journal=Journal(tmp_path / "j.sqlite"))
    ev = setup(run, store)
    evaluate(run, ev, 1, PASS)
    holdout(run, ev, 1, FAIL, request_id="t-1")
    evaluate(run, ev, 2, [490.0] * 4)
    run.ctx.flush()
    run.ctx.journal.close()  # the process dies here
    again = Run(run_config, store, clock=clock, sample_wait_seconds=0, journal=Journal(tmp_path / "j.sqlite"))
    status = again.status()
    assert status.tests_rejected == 1 and status.test_in_flight == 2 and status.latest_test is not None
    assert again.ctx.judge.retried_test("t-1") == status.latest_test


RULE = {"random": {"min_win_or_draw": 0.95}, "lookahead": {"min_win": 0.6}}


@pytest.fixture
def battle_run(make_run: Callable[..., Run], run_config: RunConfig) -> Run:
    """Tic-tac-toe with the issue's battle rule: 4 validation and 100 test games against each baseline."""
    data = run_config.model_dump()
    data["env"] = {"id": "rlfleet/TicTacToe-v0"}
    data["evaluation"] = {**data["evaluation"], "against": RULE}
    return make_run(RunConfig.model_validate(data))


def games(wins: int, draws: int, losses: int) -> list[float]:
    return [1.0] * wins + [0.0] * draws + [-1.0] * losses


def test_the_battle_rule_counts_each_baselines_games_and_needs_every_bar(battle_run: Run, store: LocalStore) -> None:
    ev = setup(battle_run, store)
    short = evaluate(battle_run, ev, 1, games(3, 1, 0) + games(2, 0, 2))  # lookahead: win 0.5 < 0.6
    assert not short.solved and not short.test_requested
    assert [(b.opponent, b.wins, b.draws, b.losses) for b in short.battles] == [
        ("random", 3, 1, 0), ("lookahead", 2, 0, 2)]
    passed = evaluate(battle_run, ev, 2, games(2, 2, 0) + games(3, 1, 0))
    assert passed.solved and passed.test_requested
    rejected = holdout(battle_run, ev, 2, games(90, 4, 6) + games(70, 0, 30))  # random: 0.94 < 0.95
    assert not rejected.confirmed and battle_run.ctx.lifecycle.state == "running"
    assert evaluate(battle_run, ev, 3, games(4, 0, 0) + games(4, 0, 0)).test_requested
    confirmed = holdout(battle_run, ev, 3, games(90, 5, 5) + games(60, 10, 30))  # both bars exactly met
    assert confirmed.confirmed and battle_run.ctx.lifecycle.state == "solved"
    assert (confirmed.rule, confirmed.bound) == ("against", None)
    assert "vs lookahead: 60 won, 10 drawn, 30 lost of 100" in battle_run.status().run_message
    assert "needs win >= 0.6" in battle_run.status().run_message


def test_battle_reports_hold_games_of_every_baseline_and_results_of_one_zero_or_minus_one(
        battle_run: Run, store: LocalStore) -> None:
    ev = setup(battle_run, store)
    with pytest.raises(Invalid, match="evaluation.episodes=4 games against each of the 2 baselines"):
        evaluate(battle_run, ev, 1, games(4, 0, 0))
    with pytest.raises(Invalid, match="return is 1, 0 or -1"):
        evaluate(battle_run, ev, 1, games(4, 0, 0) + [0.5, 1.0, 1.0, 1.0])
    for opponent in ("v4", "v2", "random"):  # never published, itself, a baseline (its games are the returns)
        with pytest.raises(Invalid, match="only other published versions"):
            battle_run.evaluations.evaluate(EvaluationReport(
                worker_id=ev, policy_version=2, returns=games(8, 0, 0), lengths=[5] * 8,
                battles=[BattleRecord(opponent=opponent, wins=1, draws=0, losses=0)]))
    assert battle_run.status().latest_evaluation is None  # nothing refused was recorded


def test_each_validation_rates_its_version_from_every_game_so_far(battle_run: Run, store: LocalStore) -> None:
    ev = setup(battle_run, store)
    weak = evaluate(battle_run, ev, 1, games(2, 0, 2) + games(0, 1, 3))
    strong = battle_run.evaluations.evaluate(EvaluationReport(
        worker_id=ev, policy_version=3, returns=games(4, 0, 0) + games(3, 1, 0), lengths=[5] * 8,
        battles=[BattleRecord(opponent="v1", wins=18, draws=2, losses=0)]))
    assert weak.elo is not None and strong.elo is not None and strong.elo > weak.elo + 200
    assert [b.opponent for b in strong.battles] == ["random", "lookahead", "v1"]
    status = battle_run.status()
    assert (status.latest_evaluation.elo, status.self_play) == (strong.elo, None)  # self-play is not set here


def test_a_battle_rule_needs_a_two_player_game() -> None:
    with pytest.raises(ValueError, match="evaluation.against needs a two-player game"):
        RunConfig.model_validate({"evaluation": {"against": RULE}})
    with pytest.raises(ValueError, match="the baselines are"):
        RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"}, "evaluation": {"against": {"greedy": {
            "min_win": 0.5}}}})


# ----- the judge alone ---------------------------------------------------------------------------------------
EVALUATOR = "evaluator-1-abcdef"


def lone_judge(config: RunConfig) -> Judge:
    return Judge(config.env, config.evaluation)


def validation(version: int, returns: list[float], request_id: str | None = None) -> EvaluationReport:
    return EvaluationReport(worker_id=EVALUATOR, policy_version=version, returns=returns, lengths=[10] * len(returns),
                            request_id=request_id)


def held_out(version: int, returns: list[float], request_id: str | None = None) -> HoldoutReport:
    return HoldoutReport(worker_id=EVALUATOR, policy_version=version, returns=returns, lengths=[10] * len(returns),
                         request_id=request_id)


def judged(judge: Judge, version: int, returns: list[float], request_id: str | None = None,
           alive: Callable[[str], bool] = lambda _: True) -> bool:
    """Whether the validation asked for a held-out test."""
    return judge.judge(validation(version, returns, request_id), latest_version=5, env_steps=100, wall_seconds=1.0,
                       iteration=2, alive=alive).test_requested


def test_a_validation_marks_one_row_and_a_test_marks_the_judges_state(run_config: RunConfig) -> None:
    judge = lone_judge(run_config)
    assert judged(judge, 1, PASS, request_id="r1")
    assert judge.pending.dirty and [args[1] for _, args in judge.pending.rows] == ["r1"]
    judge.pending.clear()
    judge.test(held_out(1, FAIL), env_steps=200, wall_seconds=2.0, iteration=3)
    assert judge.pending.dirty and judge.pending.rows == []


def test_refusals_and_reads_mark_nothing(run_config: RunConfig) -> None:
    judge = lone_judge(run_config)
    with pytest.raises(Invalid, match="evaluation.episodes=4"):
        judged(judge, 1, PASS[:3])
    with pytest.raises(Invalid, match="never published"):
        judged(judge, 6, PASS)
    with pytest.raises(Conflict, match="no held-out test of policy v1 was requested"):
        judge.test(held_out(1, FAIL), env_steps=0, wall_seconds=0.0, iteration=0)
    judge.retried("r1")
    judge.retried_test("t1")
    judge.elo_range()
    assert (judge.latest, judge.confirmed, judge.rejected) == (None, None, 0)
    assert not judge.pending.dirty and judge.pending.rows == []


def test_a_candidate_whose_evaluator_died_may_be_nominated_again(run_config: RunConfig) -> None:
    judge = lone_judge(run_config)
    assert judged(judge, 1, PASS)
    assert not judged(judge, 2, PASS)  # one test at a time
    assert judged(judge, 3, PASS, alive=lambda worker: worker != EVALUATOR)


def test_an_operators_request_tests_the_next_version_whatever_its_score(run_config: RunConfig) -> None:
    judge = lone_judge(run_config)
    judge.force()
    assert judge.pending.dirty
    assert judged(judge, 1, [0.0] * 4) and not judge.force_test


def test_validations_tests_and_the_pending_request_survive_a_round_trip(run_config: RunConfig,
                                                                        tmp_path: Path) -> None:
    judge = lone_judge(run_config)
    journal = JournalFor(tmp_path / "journal.sqlite", judge)
    judged(judge, 1, PASS, request_id="r1")
    judge.test(held_out(1, FAIL, request_id="t1"), env_steps=200, wall_seconds=2.0, iteration=3)
    judged(judge, 2, [300.0] * 4)
    judged(judge, 3, [490.0] * 4, request_id="r3")  # nominated: its test is pending
    judge.force()
    journal.commit()
    restored = journal.restore(lone_judge(run_config), now=0.0)
    assert restored.results == judge.results and restored.best == judge.best and restored.tests == judge.tests
    assert (restored.under_test, restored.force_test) == ((3, 490.0, EVALUATOR), True)
    assert restored.retried("r3") == judge.retried("r3") and restored.retried_test("t1") == judge.tests[0]
    assert restored.test(held_out(3, [480.0] * 100), env_steps=300, wall_seconds=3.0, iteration=4).confirmed


def test_a_journal_from_before_held_out_tests_keeps_its_validations(run_config: RunConfig) -> None:
    old = lone_judge(run_config)
    judged(old, 1, PASS, request_id="r1")
    rows = [args for _, args in old.pending.rows]
    judge = lone_judge(run_config)
    judge.load_state_dict(Stored(None, {"evaluations": rows}), now=0.0)
    assert judge.results == old.results and judge.retried("r1") == old.results[0]
    assert (judge.tests, judge.under_test, judge.force_test) == ([], None, False)
