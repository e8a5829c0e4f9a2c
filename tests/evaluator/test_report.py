"""The evaluator's report: one request id per evaluation, reused by the client's retries."""

from __future__ import annotations

import pytest

from evaluator.main import report
from shared.wire import EvaluationReport, EvaluationResult
from tests.shared.fake_coordinator import FakeCoordinator, make_session


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared.worker.client.random.random", lambda: 0.0)


def test_a_retried_evaluation_reuses_its_request_id() -> None:
    fake = FakeCoordinator(fail_once={"evaluations"})
    session = make_session(fake, "evaluator")
    session.register()
    first = report(session, "/v1/evaluations", EvaluationResult, EvaluationReport, 3, [500.0, 480.0], [500, 480], 7)
    report(session, "/v1/evaluations", EvaluationResult, EvaluationReport, 4, [10.0, 12.0], [10, 12], 8)
    session.close()
    assert (first.policy_version, first.mean) == (3, 490.0)
    attempts = fake.of("evaluations")
    assert [a.status for a in attempts] == [503, 200, 200]
    ids = [a.body["request_id"] for a in attempts]
    assert ids[0] == ids[1], "the retry must carry the first try's id"
    assert ids[2] != ids[0], "another evaluation is another request"
    assert attempts[0].body == attempts[1].body  # the very same request
    assert attempts[2].body["policy_version"] == 4 and attempts[2].body["worker_id"] == "worker-1"
    assert (attempts[0].body["seed"], attempts[2].body["seed"]) == (7, 8)
