"""launcher.progress: the one-line progress of a run, whose held-out tests read as verdicts only where the run has
a threshold."""

from __future__ import annotations

from coordinator.api.examples import STATUS, TESTED
from launcher.progress import describe


def test_a_test_reads_as_its_verdict_or_as_a_score_without_a_threshold() -> None:
    confirmed = STATUS.model_copy(update={"latest_test": TESTED.model_copy(update={"confirmed": True})})
    assert "test v3 498.5 confirmed" in describe(confirmed)
    untested = TESTED.model_copy(update={"confirmed": False})
    assert "test v3 498.5 rejected" in describe(STATUS.model_copy(update={"latest_test": untested}))
    scored = STATUS.model_copy(update={"latest_test": untested, "no_threshold": True, "test_in_flight": 3})
    assert "tests: testing v3, test v3 498.5 (no threshold)" in describe(scored)
