"""Journals of finished runs for the tools that read them (`rlfleet report`), written by the coordinator's own
components: the judge records the validations and the held-out test as it does for evaluators' reports, the
lifecycle ends the run, and the journal commits their state and rows as a run's unit of work does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.state.config import LiveConfig
from rlfleet.coordinator.state.judge import Judge
from rlfleet.coordinator.state.lifecycle import Lifecycle
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout, new_run_name
from rlfleet.shared.wire import EvaluationReport, HoldoutReport
from tests.support.journal import journal_with


def journal_run(data_dir: Path, config: RunConfig, validations: Sequence[tuple[int, list[float]]],
                test: list[float] | None, now: float = 1_700_000_000.0) -> Path:
    """A run of `config` whose evaluator validated version i+1 at env steps `validations[i][0]` with those
    returns and, when `test` is given, held-out tested the best validated version with `test`'s returns (if
    the judge asked for a test; otherwise an operator's test of the last version). Returns the run directory."""
    name = new_run_name(config, now + config.seed)
    layout = RunLayout(data_dir, name)
    judge = Judge(config.env, config.evaluation)
    lifecycle = Lifecycle(config.budget, lambda: 0.0)
    journal: Journal = journal_with(Judge.tables, layout.journal)
    for version, (steps, returns) in enumerate(validations, 1):
        if test is not None and version == len(validations) and judge.under_test is None:
            judge.force()  # an operator's `rlfleet ctl evaluate --test`: the last validation is tested
        judge.judge(EvaluationReport(worker_id="e1", policy_version=version, returns=returns,
                                     lengths=[1] * len(returns)), version, steps, float(version), version,
                    lambda _: True)
    steps = validations[-1][0] if validations else 0
    if test is not None:
        assert judge.under_test is not None
        result = judge.test(HoldoutReport(worker_id="e1", policy_version=judge.under_test[0], returns=test,
                                          lengths=[1] * len(test)), steps, float(steps), steps)
        lifecycle.end("solved" if result.confirmed else "budget_exhausted", "ended", 1.0)
    else:
        lifecycle.end("budget_exhausted", "ended", 1.0)
    live = LiveConfig(config.model_copy(update={"name": name}))  # a run's config carries the run's name
    journal.submit(judge.pending.rows, {"config": live.state_dict(),
                                        "judge": judge.state_dict(), "lifecycle": lifecycle.state_dict(),
                                        "data": {"env_steps": steps}}).result()
    journal.close()
    return layout.run_dir
