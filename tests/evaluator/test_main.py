"""The evaluator's report: one request id per evaluation, reused by the client's retries; the policy its
end-of-budget test plays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlfleet.evaluator.main import kept_policy, report
from rlfleet.shared.storage.layout import BEST_POLICY, BEST_SCORE, policy_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import EvaluationReport, EvaluationResult
from tests.support.fake_coordinator import FakeCoordinator, make_session

pytestmark = pytest.mark.usefixtures("short_backoff")


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


def test_the_end_of_budget_test_plays_the_kept_copy_of_the_best_or_the_policy_stores(tmp_path: Path) -> None:
    best, store = LocalStore(tmp_path / "best"), LocalStore(tmp_path / "store")
    store.put(policy_path(5), b"v5 in the store")
    store.put(policy_path(7), b"v7 in the store")
    assert kept_policy(best, store, 5) == b"v5 in the store"  # nothing kept yet
    sha = best.put(BEST_POLICY, b"v5 kept")
    best.put(BEST_SCORE, json.dumps({"policy_sha256": sha, "validation": {"policy_version": 5}}).encode())
    assert kept_policy(best, store, 5) == b"v5 kept"
    best.put(BEST_POLICY, b"v6, kept before its score (the evaluator stopped between the two writes)")
    assert kept_policy(best, store, 5) == b"v5 in the store"  # the score no longer names the policy in best/
    best.put(BEST_POLICY, b"v5 kept")
    assert kept_policy(best, store, 7) == b"v7 in the store"  # best/ holds another version
    with pytest.raises(RuntimeError, match=r"policy v9, the best validated, is neither in .* \(rlfleet ctl stop\)"):
        kept_policy(best, store, 9)
