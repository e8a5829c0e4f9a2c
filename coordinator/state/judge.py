"""Validations, held-out tests and the solve rule: evaluators report episodes; the judge decides 'solved'.

A validation (every policy version, `evaluation.episodes` episodes on validation seeds) only nominates: when
it reaches the threshold, beats the test score of every candidate tested so far, and no test is in flight,
the reply asks the evaluator to run the held-out test of that version (`evaluation.test_episodes` on test
seeds, disjoint from every training and validation seed). The run is solved only when such a test meets the
solve rule (shared/solve_rule.py); a test that falls short is counted as a rejected validation pass and training
goes on. So a lucky 10-episode validation can no longer end a run, and at most one test runs at a time (in the
evaluator's process, never the learner's): tests never starve training.

The solve rule. A user reads "solved" as "this policy reaches the threshold": when they play it again on fresh
seeds (`rlfleet test`, as many episodes), its mean should clear the threshold nearly always. "Test mean >=
threshold" did not make that true: a run tests candidate after candidate and stops at the first that clears,
and the winner of several noisy tests is biased upward (a policy whose true mean sits at the threshold passed
half its tests, and then failed half its re-tests). So a test confirms when the one-sided 95% lower prediction
bound of an independent re-test's mean clears the threshold:

    mean - t_{0.95, n-1} · s · √(2/n) >= threshold

(s the sample standard deviation, n the test's episodes). The re-test mean minus the test mean is normal with
variance 2σ²/n whatever the true mean is, so it falls below the bound in 5% of pairs. For what selection does:
a policy whose true mean is at or below the threshold now confirms with probability at most P(Z >= 1.645·√2),
about 1% per test instead of 50%, so even a run that tests several such candidates rarely confirms one, while a
policy clearly above the threshold (or with no spread: CartPole's 500 every episode, whose bound is its mean)
confirms at once. A correction for the number of candidates (a stricter quantile per test) would make every
long run pay for a risk the 1% already keeps small; bench/hold_rate.py measures the rule's hold rate under
independent re-tests and its cost in time to solve against the old rule.
A run with no threshold (env.solve_threshold null, no battle rule) is never solved: no validation nominates a
version on its score (an operator may still ask for a test), and when the budget is used up the judge asks for
the held-out test of the best validated version (`request_final`) before the run ends
(coordinator/operations/budget.py). That test answers "how good is the policy this run kept", not pass or fail.

Reports must hold exactly the configured number of episodes, of a published version (a test: of the version
asked for); a retried report (same request id) gets the first result and is counted once. Validations are
journalled as rows, tests and the pending request in the judge's own meta key.

Two-player games with `evaluation.against` (the battle rule): a report's returns are its games against each
baseline of the rule, `episodes` (a test: `test_episodes`) per baseline in the rule's order, each +1 / 0 / -1.
The judge counts won / drawn / lost itself from them, and a version passes (a test confirms) when it meets
every baseline's bar. Each validation's records (baselines, and the pool versions it played) update the Elo
ratings of all versions (coordinator/state/ratings.py); the result keeps its version's rating as of then.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.coordinator.state.ratings import elo_ratings
from rlfleet.shared import solve_rule
from rlfleet.shared.config.run_config import EnvConfig, EvalConfig
from rlfleet.shared.stats import estimate
from rlfleet.shared.wire import (
    BattleRecord,
    EvaluationReport,
    EvaluationResult,
    HoldoutReport,
    HoldoutResult,
    SolveRule,
    rule_met,
    rule_records,
)


class Judge:
    key: ClassVar[str] = "judge"
    tables: ClassVar[tuple[Table, ...]] = (
        Table("evaluations", "CREATE TABLE IF NOT EXISTS evaluations (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
              "body TEXT NOT NULL, request_id TEXT);", "SELECT body, request_id FROM evaluations ORDER BY seq"),
    )

    def __init__(self, env: EnvConfig, evaluation: EvalConfig) -> None:
        self.pending = Pending()
        self.threshold = env.threshold  # None: no threshold
        self.against = dict(evaluation.against)
        self.episodes, self.test_episodes = evaluation.episodes, evaluation.test_episodes  # per baseline of a rule
        self.results: list[EvaluationResult] = []
        self.best: EvaluationResult | None = None
        self.tests: list[HoldoutResult] = []
        self.under_test: tuple[int, float, str] | None = None  # (version, validation mean, evaluator) under test
        self._by_request: dict[str, EvaluationResult] = {}
        self._tests_by_request: dict[str, HoldoutResult] = {}
        self.force_test = False  # an operator asked for a test of the next version validated, whatever its score
        self.final: int | None = None  # the best version, whose test the run waits for at the end of its budget

    @property
    def latest(self) -> EvaluationResult | None:
        return self.results[-1] if self.results else None

    @property
    def confirmed(self) -> HoldoutResult | None:
        return next((t for t in self.tests if t.confirmed), None)

    @property
    def rule(self) -> SolveRule:
        """The rule this run's held-out tests are judged by."""
        return "against" if self.against else solve_rule.RULE

    @property
    def rejected(self) -> int:
        """Validation passes a test did not confirm; a run with no threshold has no pass to reject."""
        return 0 if self.no_threshold else sum(not t.confirmed for t in self.tests)

    @property
    def no_threshold(self) -> bool:
        """The run has no solve rule: it trains to its budget, and its end-of-budget test reports, not judges."""
        return self.threshold is None and not self.against

    @property
    def final_in_flight(self) -> int | None:
        """The version whose end-of-budget test the run waits for, while that test is asked of any evaluator."""
        if self.final is not None and self.under_test is not None and self.under_test[0] == self.final:
            return self.final
        return None

    def keeps(self, version: int) -> bool:
        """Whether the judge still needs `version`'s policy file whatever the book holds: the best validated version
        (`rlfleet test --version`, a later end-of-budget test) or the one whose end-of-budget test is asked for (a
        validation under way when training stopped may have replaced it as the best since)."""
        return version == self.final or (self.best is not None and version == self.best.policy_version)

    def elo_range(self) -> tuple[float | None, float | None]:
        """(the newest validated version's Elo rating, the highest of any)."""
        rated = [r.elo for r in self.results if r.elo is not None]
        return (rated[-1], max(rated)) if rated else (None, None)

    def retried(self, request_id: str | None) -> EvaluationResult | None:
        return self._by_request.get(request_id) if request_id else None

    def retried_test(self, request_id: str | None) -> HoldoutResult | None:
        return self._tests_by_request.get(request_id) if request_id else None

    def judge(self, report: EvaluationReport, latest_version: int, env_steps: int, wall_seconds: float,
              iteration: int, alive: Callable[[str], bool]) -> EvaluationResult:
        """Record a validation; nominate its version for a test when it deserves one."""
        mean, std = self._check(report.returns, report.lengths, self.episodes, "evaluation.episodes")
        if report.policy_version > latest_version:
            raise Invalid(f"policy version {report.policy_version} was never published (latest: {latest_version})")
        if self.under_test is not None and self.under_test[2] and not alive(self.under_test[2]):
            self.under_test = None  # its evaluator died mid-test: the candidate may be nominated again
        battles = self._records(report.returns) + self._pool_records(report, latest_version)
        # No threshold: no score nominates a version (the best is tested once, at the end of the budget).
        passes = rule_met(self.against, battles) if self.against else (
            self.threshold is not None and mean >= self.threshold)
        # Measured by their tests, not by the validations that nominated them: a lucky validation must not
        # lock out every later candidate (measured: one -116 validation of a -202 policy kept Pendulum's
        # -170 policies from ever being tested until the budget ran out). Under the threshold rule, by their
        # re-test bounds, what the rule confirms on: a rejected test of a high but spread-out mean must not lock
        # out a steadier candidate (measured: one InvertedDoublePendulum test at 9274, bound 9075, kept every
        # later policy of two runs from a test until their budgets ran out, since none validated above 9274).
        tested = max((t.mean if t.bound is None else t.bound for t in self.tests), default=-math.inf)
        deserves = passes and mean > tested
        request = (deserves or self.force_test) and self.under_test is None and self.confirmed is None
        self.force_test = self.force_test and not request
        result = EvaluationResult(
            policy_version=report.policy_version, mean=mean, std=std, episodes=len(report.returns),
            env_steps=env_steps, wall_seconds=wall_seconds, iteration=iteration, seed=report.seed, solved=passes,
            test_requested=request, battles=battles, elo=self._elo(report.policy_version, battles))
        if request:
            self.under_test = (report.policy_version, mean, report.worker_id)
        self._add(result, report.request_id)
        self.pending.mark([("INSERT INTO evaluations (body, request_id) VALUES (?, ?)",
                            (result.model_dump_json(), report.request_id))])
        return result

    def request_final(self) -> bool:
        """The budget of a run with no threshold is used up: ask any evaluator for the held-out test of the best
        validated version (after the test in flight, if an operator asked for one). False when no version was
        validated: there is nothing to test."""
        if self.best is None:
            return False
        self.final = self.best.policy_version
        if self.under_test is None:  # the worker is left empty: any evaluator runs it, one that dies is replaced
            self.under_test = (self.final, self.best.mean, "")
        self.pending.mark()
        return True

    def force(self) -> None:
        """An operator asked for a held-out test of the next version validated, whatever its score."""
        self.force_test = True
        self.pending.mark()

    def test(self, report: HoldoutReport, env_steps: int, wall_seconds: float, iteration: int) -> HoldoutResult:
        """Record the held-out test that was asked for; it confirms the candidate or rejects it."""
        if self.under_test is None or self.under_test[0] != report.policy_version:
            asked = f"v{self.under_test[0]}" if self.under_test else "none"
            raise Conflict(f"no held-out test of policy v{report.policy_version} was requested (requested: {asked})")
        self._check(report.returns, report.lengths, self.test_episodes, "evaluation.test_episodes")
        battles = self._records(report.returns)
        found = estimate(report.returns)
        interval = found.ci95
        assert interval is not None  # evaluation.test_episodes >= 2
        if self.against:
            confirmed, bound = rule_met(self.against, battles), None
        else:
            verdict = solve_rule.judge(report.returns, self.threshold)
            confirmed, bound = verdict.confirmed, verdict.bound
        result = HoldoutResult(
            policy_version=report.policy_version, mean=found.mean, std=found.std, ci95=interval,
            episodes=found.episodes, validation_mean=self.under_test[1], env_steps=env_steps,
            wall_seconds=wall_seconds, iteration=iteration, seed=report.seed, battles=battles,
            confirmed=confirmed, rule=self.rule, bound=bound)
        self.under_test = None
        self.tests.append(result)
        if report.request_id:
            self._tests_by_request[report.request_id] = result
        self.pending.mark()
        return result

    def verdict(self, test: HoldoutResult) -> str:
        """What a confirming test showed, in the words of the run's solve rule."""
        if self.against:
            rule = "; ".join(f"{b}, needs {self.against[b.opponent]}" for b in test.battles)
            return f"policy v{test.policy_version} confirmed by a held-out test: {rule}"
        low, high = test.ci95
        assert test.bound is not None  # a test that confirms was judged by the bound
        shown = solve_rule.shown
        return (f"policy v{test.policy_version} confirmed by a held-out test: {shown(test.mean)} ± {shown(test.std)} "
                f"over {test.episodes} episodes (95% t interval {shown(low)} .. {shown(high)}; re-test lower bound "
                f"{shown(test.bound)} >= threshold {self.threshold:g}: {solve_rule.RULE_TEXT}; validation "
                f"{shown(test.validation_mean)})")

    def _records(self, returns: list[float]) -> list[BattleRecord]:
        """Won / drawn / lost against each baseline of the rule, from its block of the returns."""
        if not self.against:
            return []
        odd = sorted(set(returns) - {-1.0, 0.0, 1.0})
        if odd:
            raise Invalid(f"a two-player game's return is 1, 0 or -1 (won, drawn, lost); the report has {odd[:5]}")
        return rule_records(self.against, returns)

    def _pool_records(self, report: EvaluationReport, latest_version: int) -> list[BattleRecord]:
        for record in report.battles:
            version = int(record.opponent[1:]) if record.opponent.startswith("v") else 0
            if not 1 <= version <= latest_version or version == report.policy_version:
                raise Invalid(f"battles name {record.opponent!r}: only other published versions (vN, pool versions) "
                              f"are reported there; games against the baselines are the returns")
            if record.games == 0:
                raise Invalid(f"the record against {record.opponent} holds no games")
        return list(report.battles)

    def _elo(self, version: int, battles: list[BattleRecord]) -> float | None:
        """The version's rating from every validation's games so far, its own included."""
        if not battles:
            return None
        records = [(f"v{r.policy_version}", b.opponent, b.wins, b.draws, b.losses)
                   for r in self.results for b in r.battles]
        records += [(f"v{version}", b.opponent, b.wins, b.draws, b.losses) for b in battles]
        return round(elo_ratings(records)[f"v{version}"], 1)

    def _check(self, returns: list[float], lengths: list[int], episodes: int, field: str) -> tuple[float, float]:
        if len(returns) != len(lengths):
            raise Invalid("returns and lengths must have the same number of episodes")
        if self.against:
            total = episodes * len(self.against)
            if len(returns) != total:
                raise Invalid(f"a report must hold {field}={episodes} games against each of the {len(self.against)} "
                              f"baselines of evaluation.against ({total} episodes), got {len(returns)}")
        elif len(returns) != episodes:
            raise Invalid(f"a report must hold {field}={episodes} episodes, got {len(returns)}")
        values = np.asarray(returns, dtype=np.float64)
        return float(values.mean()), float(values.std())

    def _add(self, result: EvaluationResult, request_id: str | None) -> None:
        self.results.append(result)
        if request_id:
            self._by_request[request_id] = result
        if self.best is None or result.mean > self.best.mean:
            self.best = result

    def state_dict(self) -> dict:
        return {"tests": [t.model_dump(mode="json") for t in self.tests], "pending": self.under_test,
                "force_test": self.force_test, "final": self.final,
                "test_requests": {k: i for i, t in enumerate(self.tests) for k, v in self._tests_by_request.items()
                                  if v is t}}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        for body, request_id in stored.rows["evaluations"]:
            self._add(EvaluationResult.model_validate_json(body), request_id)
        if state is None:  # a journal from before held-out tests
            return
        self.tests = [HoldoutResult.model_validate(t) for t in state["tests"]]
        self.under_test = tuple(state["pending"]) if state["pending"] else None  # type: ignore[assignment]
        self.force_test = bool(state.get("force_test", False))
        self.final = state.get("final")  # journals from before runs without a threshold hold none
        self._tests_by_request = {k: self.tests[i] for k, i in state["test_requests"].items()}
