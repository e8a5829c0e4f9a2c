"""coordinator/generations.py, the component itself: leases and re-offers, exactly-once results, late and
duplicate reports, fraction completion, idempotent opens, learner restarts and the journalled state."""

from __future__ import annotations

import json

import pytest

from coordinator.errors import Conflict, Invalid, NotFound
from coordinator.generations import Generations
from shared.wire_base import PolicyRef
from shared.wire_generations import GenerationOpen, MemberResult, MemberSpec, Perturbation

LEASE = 10.0
PERTURBATION = Perturbation(noise_seed=1, noise_size=4096, sigma=0.1, episodes=1, lease_seconds=LEASE)


def policy(version: int) -> PolicyRef:
    return PolicyRef(version=version, path=f"policies/v{version:06d}.safetensors", sha256="0" * 64)


def request(request_id: str = "open-1", version: int = 1, pairs: int = 2) -> GenerationOpen:
    members = [MemberSpec(noise_index=10 * k, sign=s) for k in range(pairs) for s in (1, -1)]
    return GenerationOpen(worker_id="learner-1", request_id=request_id, policy_version=version,
                          perturbation=PERTURBATION, members=members)


def seed_of(number: int) -> int:
    return 1000 * number


def result(member: int, ret: float = 1.0) -> MemberResult:
    return MemberResult(worker_id="collector-1", member=member, mean_return=ret, mean_length=5.0, episodes=1,
                        env_steps=5)


def opened(pairs: int = 2) -> Generations:
    generations = Generations()
    generations.open(request(pairs=pairs), policy(1), seed_of)
    return generations


def test_open_issues_numbers_from_one_with_the_seed_of_its_number_and_refuses_a_stale_policy() -> None:
    generations = Generations()
    with pytest.raises(Conflict, match="v0"):
        generations.open(request(), None, seed_of)
    with pytest.raises(Conflict, match=r"latest published policy \(v2\), not v1"):
        generations.open(request(version=1), policy(2), seed_of)
    first = generations.open(request(), policy(1), seed_of)
    assert (first.number, first.seed, first.policy) == (1, 1000, policy(1))
    assert generations.status(0.0).model_dump() == {
        "generation": 1, "open": True, "population": 4, "received": 0, "claimed": 0, "generations_closed": 0,
        "results_accepted": 0, "late_results": 0, "duplicate_results": 0, "members_reoffered": 0,
        "last_fraction": 0.0}


def test_claims_hand_out_each_member_once_until_its_lease_runs_out() -> None:
    generations = opened()
    claims = [generations.claim("c1", now=0.0) for _ in range(4)]
    assert [c[1] for c in claims if c] == [0, 1, 2, 3]
    assert generations.claim("c2", now=1.0) is None
    assert not generations.claimable(1.0)
    assert generations.status(1.0).claimed == 4
    assert generations.report(1, result(0)) == "accepted"
    # member 1's holder died: once the lease has passed it goes to another collector, counted as re-offered
    assert generations.claim("c2", now=LEASE - 0.01) is None
    assert generations.claimable(LEASE)
    again = generations.claim("c2", now=LEASE)
    assert again is not None and again[1] == 1
    assert generations.status(LEASE).members_reoffered == 1
    assert [generations.claim("c2", now=LEASE)[1] for _ in range(2)] == [2, 3]  # type: ignore[index]
    assert generations.claim("c2", now=LEASE) is None  # member 0 reported: never offered again
    assert generations.status(LEASE).members_reoffered == 3


def test_no_claim_without_an_open_generation() -> None:
    generations = Generations()
    assert generations.claim("c1", 0.0) is None and not generations.claimable(0.0)


def test_a_result_is_applied_once_and_a_repeat_is_a_duplicate() -> None:
    generations = opened()
    generations.claim("c1", 0.0)
    assert generations.report(1, result(0, ret=3.0)) == "accepted"
    assert generations.report(1, result(0, ret=99.0)) == "duplicate"
    outcome = generations.current.results[0]  # type: ignore[union-attr]
    assert (outcome.mean_return, outcome.noise_index, outcome.sign) == (3.0, 0, 1)
    status = generations.status(0.0)
    assert (status.results_accepted, status.duplicate_results, status.received, status.claimed) == (1, 1, 1, 0)
    # a result from a collector whose lease ran out (or who claimed before a restart) still counts
    assert generations.report(1, result(3, ret=-1.0)) == "accepted"
    assert generations.current.results[3].sign == -1  # type: ignore[union-attr]


def test_unknown_member_refused() -> None:
    generations = opened()
    with pytest.raises(Invalid, match="member 4 does not exist: generation 1 has 4 members"):
        generations.report(1, result(4))


def test_close_waits_for_the_fraction_and_force_closes_early() -> None:
    generations = opened(pairs=5)  # 10 members
    for member in range(6):
        generations.report(1, result(member, ret=float(member)))
    assert not generations.ready(1, 0.7)
    assert generations.close(1, 0.7, force=False) is None
    assert generations.current is not None
    generations.report(1, result(6))
    assert generations.ready(1, 0.7)
    closed = generations.close(1, 0.7, force=False)
    assert closed is not None and len(closed.results) == 7 and generations.current is None
    assert generations.close(1, 0.7, force=False) is closed  # a retried close gets the same results
    assert generations.ready(1, 1.0)  # nothing left to wait for
    status = generations.status(0.0)
    assert (status.open, status.generations_closed, status.last_fraction) == (False, 1, 0.7)

    generations.open(request("open-2"), policy(1), seed_of)
    generations.report(2, result(0))
    forced = generations.close(2, 1.0, force=True)
    assert forced is not None and list(forced.results) == [0]
    assert generations.status(0.0).last_fraction == 0.25


def test_late_results_are_counted_and_never_applied() -> None:
    generations = opened()
    generations.report(1, result(0))
    generations.report(1, result(1))
    closed = generations.close(1, 0.5, force=False)
    assert closed is not None
    assert generations.report(1, result(2)) == "late"
    assert generations.report(1, result(2)) == "duplicate"  # a retried late report is recognised
    assert generations.report(1, result(0)) == "duplicate"
    assert sorted(closed.results) == [0, 1]
    generations.open(request("open-2"), policy(1), seed_of)
    generations.open(request("open-3"), policy(1), seed_of)  # closes 2: generation 1 is now too old to know
    assert generations.report(1, result(3)) == "late"
    status = generations.status(0.0)
    assert (status.late_results, status.duplicate_results, status.results_accepted) == (2, 2, 2)


def test_find_refuses_a_future_number_and_close_of_an_old_one_is_not_found() -> None:
    generations = opened()
    with pytest.raises(Invalid, match="generation 2 does not exist yet"):
        generations.find(2)
    with pytest.raises(Invalid, match="does not exist yet"):
        generations.report(2, result(0))
    generations.close(1, 1.0, force=True)
    generations.open(request("open-2"), policy(1), seed_of)
    generations.close(2, 1.0, force=True)
    assert generations.find(1) is None
    with pytest.raises(NotFound, match="generation 1 closed long ago"):
        generations.close(1, 1.0, force=False)


def test_a_retried_open_gets_the_same_generation_and_a_reused_request_id_with_other_members_conflicts() -> None:
    generations = opened()
    generations.report(1, result(0))
    again = generations.open(request(), policy(1), seed_of)
    assert again.number == 1 and list(again.results) == [0] and generations.last_number == 1
    with pytest.raises(Conflict, match="request id 'open-1' opened generation 1 with other members"):
        generations.open(request(pairs=3), policy(1), seed_of)
    generations.close(1, 1.0, force=True)
    assert generations.open(request(), policy(2), seed_of).number == 1  # retried after the close, too


def test_a_restarted_learner_opening_anew_closes_the_generation_it_left_open() -> None:
    generations = opened()
    generations.claim("c1", 0.0)
    generations.report(1, result(1))
    second = generations.open(request("after-restart"), policy(1), seed_of)
    assert second.number == 2 and generations.closed is not None and generations.closed.number == 1
    assert generations.closed.holders == {}
    assert generations.report(1, result(0)) == "late"
    assert generations.claim("c1", 0.0) == (second, 0)
    status = generations.status(0.0)
    assert (status.generation, status.generations_closed, status.last_fraction) == (2, 1, 0.25)


def test_state_dict_round_trip_keeps_acknowledged_results_but_not_claims() -> None:
    generations = opened()
    generations.report(1, result(0, ret=2.5))
    generations.claim("c1", 0.0)
    generations.report(1, result(1))
    generations.close(1, 0.5, force=False)
    generations.report(1, result(2))  # late
    generations.open(request("open-2"), policy(1), seed_of)
    generations.report(2, result(3, ret=-4.0))
    generations.claim("c1", 0.0)

    restored = Generations()
    restored.load_state_dict(json.loads(json.dumps(generations.state_dict())))  # the journal stores JSON
    assert restored.state_dict() == generations.state_dict()
    assert restored.current is not None and restored.current.results == generations.current.results  # type: ignore[union-attr]
    assert restored.current.results[3].mean_return == -4.0
    assert restored.closed is not None and restored.closed.results[0].mean_return == 2.5
    assert restored.report(2, result(3)) == "duplicate"
    assert restored.report(1, result(2)) == "duplicate"  # the late one is still recognised
    assert restored.claim("c2", 0.0) == (restored.current, 0)  # claims are not journalled: offered again
    assert restored.open(request("open-3"), policy(1), seed_of).number == 3  # numbers keep increasing
    fresh = Generations()
    fresh.load_state_dict(None)  # journals from before population evaluation
    assert fresh.state_dict() == Generations().state_dict()
