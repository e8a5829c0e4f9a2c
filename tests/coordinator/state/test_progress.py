"""coordinator.state.progress.LearnerProgress: what the learner last reported, the iteration that never goes
back, failed hooks kept with their first error; through a real journal, and from journals older than hooks."""

from __future__ import annotations

from pathlib import Path

from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.progress import LearnerProgress
from rlfleet.shared.wire import LearnReport
from tests.support.components import JournalFor

LEARNER = "learner-1-abcdef"


def learn(iteration: int, **fields: object) -> LearnReport:
    return LearnReport(worker_id=LEARNER, iteration=iteration, transitions_trained=32 * iteration, **fields)


def test_a_report_replaces_iteration_and_losses_and_keeps_each_hooks_first_error() -> None:
    progress = LearnerProgress()
    progress.report(learn(3, losses={"q": 0.5}, hooks_failed={"hooks:h@publish": "boom 1"}))
    progress.report(learn(4, losses={"q": 0.25}, hooks_failed={"hooks:h@publish": "boom 2", "hooks:g@end": "oops"}))
    assert (progress.iteration, progress.transitions_trained, progress.losses) == (4, 128, {"q": 0.25})
    assert progress.hooks_failed == {"hooks:h@publish": "boom 1", "hooks:g@end": "oops"}
    progress.report(learn(5))  # a restarted learner reports no failures until its hooks fail again
    assert progress.hooks_failed == {"hooks:h@publish": "boom 1", "hooks:g@end": "oops"}


def test_a_publish_never_moves_the_iteration_back() -> None:
    progress = LearnerProgress()
    progress.published(10)
    progress.published(7)
    assert progress.iteration == 10


def test_reports_and_publishes_mark_the_state() -> None:
    progress = LearnerProgress()
    assert not progress.pending.dirty
    progress.report(learn(1))
    assert progress.pending.dirty and progress.pending.rows == []
    progress.pending.clear()
    progress.published(1)
    assert progress.pending.dirty


def test_progress_survives_a_round_trip(tmp_path: Path) -> None:
    progress = LearnerProgress()
    journal = JournalFor(tmp_path / "journal.sqlite", progress)
    progress.report(learn(6, losses={"q": 0.125, "td": 2.0}, hooks_failed={"hooks:h@publish": "boom"}))
    journal.commit()
    restored = journal.restore(LearnerProgress(), now=0.0)
    assert restored.state_dict() == progress.state_dict()


def test_a_journal_from_before_hooks_loads_with_none_failed() -> None:
    restored = LearnerProgress()
    restored.load_state_dict(Stored({"iteration": 2, "transitions_trained": 64, "losses": {"q": 1.0}}), now=0.0)
    assert (restored.iteration, restored.hooks_failed) == (2, {})
