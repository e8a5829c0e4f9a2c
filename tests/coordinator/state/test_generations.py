"""The generations component: members leased and offered again, results applied once and taken from the
member's claimant only, late ones counted once and never applied, closing by fraction or by force, retries,
and its journal state."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlfleet.coordinator.errors import Conflict, Invalid, MemberNotHeld, NotFound
from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.generations import Generations
from rlfleet.shared.wire import GenerationOpen, MemberResult, MemberSpec, Perturbation, PolicyRef
from tests.support.components import JournalFor

POLICY = PolicyRef(version=3, path="policies/v0000000003.safetensors", sha256="a" * 64)
PERTURBATION = Perturbation(noise_seed=1, noise_size=4096, sigma=0.1, episodes=1, lease_seconds=10.0)


def _open_request(request_id: str = "r1", version: int = 3, pairs: int = 2) -> GenerationOpen:
    members = [MemberSpec(noise_index=10 * i, sign=sign) for i in range(pairs) for sign in (1, -1)]
    return GenerationOpen(worker_id="learner-1", request_id=request_id.ljust(32, "0"), policy_version=version,
                          perturbation=PERTURBATION, members=members)


def _result(member: int, ret: float = 10.0, worker: str = "collector-1") -> MemberResult:
    return MemberResult(worker_id=worker, member=member, mean_return=ret, mean_length=ret, episodes=1,
                        env_steps=int(ret))


def _claim_all(g: Generations, worker: str = "collector-1", now: float = 0.0) -> None:
    """`worker` claims every member of the open generation."""
    while g.claim(worker, now) is not None:
        pass


@pytest.fixture
def gens() -> Generations:
    g = Generations()
    g.open(_open_request(), POLICY, lambda n: 1000 + n)
    _claim_all(g)
    return g


def test_opening_numbers_generations_and_seeds_each(gens: Generations) -> None:
    assert gens.current is not None and gens.current.number == 1 and gens.current.seed == 1001
    assert gens.current.policy == POLICY


def test_a_generation_perturbs_only_the_latest_policy() -> None:
    with pytest.raises(Conflict, match="latest published policy"):
        Generations().open(_open_request(version=2), POLICY, lambda n: n)
    with pytest.raises(Conflict, match="v0"):
        Generations().open(_open_request(), None, lambda n: n)


def test_a_retried_open_gets_the_same_generation_and_a_reused_id_with_other_members_is_refused(
        gens: Generations) -> None:
    assert gens.open(_open_request(), POLICY, lambda n: n).number == 1
    with pytest.raises(Conflict, match="fresh request id"):
        gens.open(_open_request(pairs=3), POLICY, lambda n: n)


def test_members_are_claimed_once_until_their_lease_runs_out() -> None:
    gens = Generations()
    gens.open(_open_request(), POLICY, lambda n: 1000 + n)
    claims = [gens.claim("c1", now=0.0) for _ in range(4)]
    assert [index for _, index in claims] == [0, 1, 2, 3]  # type: ignore[misc]
    assert gens.claim("c2", now=5.0) is None and not gens.claimable(5.0)
    assert gens.claimable(10.0)
    again = gens.claim("c2", now=10.0)
    assert again is not None and again[1] == 0 and gens.members_reoffered == 1
    assert gens.status(10.0).claimed == 1  # the other three leases ran out too; only the new one is live


def test_a_result_is_applied_once(gens: Generations) -> None:
    assert gens.report(1, _result(0, 50.0)) == "accepted"
    assert gens.report(1, _result(0, 99.0)) == "duplicate"
    assert gens.current is not None and gens.current.results[0].mean_return == 50.0
    assert gens.results_accepted == 1 and gens.duplicate_results == 1
    assert gens.claim("c2", 100.0) == (gens.current, 1)  # a reported member is never offered again


def test_a_result_is_taken_from_the_members_claimant_only(gens: Generations) -> None:
    assert gens.claim("collector-2", PERTURBATION.lease_seconds) == (gens.current, 0)  # lapsed: taken over
    with pytest.raises(MemberNotHeld, match="another worker claimed it"):
        gens.report(1, _result(0, worker="collector-1"))  # the first claimant, too slow
    assert gens.report(1, _result(1, worker="collector-1")) == "accepted"  # its lapsed lease: still its member
    fresh = Generations()
    fresh.open(_open_request(), POLICY, lambda n: n)
    with pytest.raises(MemberNotHeld, match="nobody claimed it"):
        fresh.report(1, _result(0))
    assert gens.report(1, _result(0, worker="collector-2")) == "accepted"
    assert gens.results_accepted == 2 and gens.duplicate_results == 0 and gens.late_results == 0


def test_closing_waits_for_the_fraction_unless_forced(gens: Generations) -> None:
    gens.report(1, _result(0))
    gens.report(1, _result(1))
    assert not gens.ready(1, 0.75) and gens.close(1, 0.75, force=False) is None
    assert gens.ready(1, 0.5)
    gens.report(1, _result(2))
    closed = gens.close(1, 0.75, force=False)
    assert closed is not None and sorted(closed.results) == [0, 1, 2]
    assert gens.current is None and gens.last_fraction == 0.75
    assert gens.close(1, 0.75, force=False) is closed  # a retried close gets the same results


def test_a_forced_close_takes_what_arrived(gens: Generations) -> None:
    gens.report(1, _result(3))
    closed = gens.close(1, 1.0, force=True)
    assert closed is not None and list(closed.results) == [3]


def test_results_after_the_close_are_late_counted_and_never_applied(gens: Generations) -> None:
    gens.report(1, _result(0))
    gens.close(1, 0.25, force=False)
    assert gens.report(1, _result(1)) == "late"
    assert gens.report(1, _result(1)) == "duplicate"  # the same late member again
    with pytest.raises(MemberNotHeld):
        gens.report(1, _result(2, worker="collector-2"))  # late, and not from its claimant
    assert gens.closed is not None and list(gens.closed.results) == [0]
    gens.open(_open_request("r2"), POLICY, lambda n: n)
    gens.close(2, 1.0, force=True)
    gens.open(_open_request("r3"), POLICY, lambda n: n)
    for _ in range(2):  # two generations back: nothing left to tell a retry by, so never counted
        with pytest.raises(MemberNotHeld, match="closed before the last one"):
            gens.report(1, _result(2))
    assert gens.late_results == 1 and gens.duplicate_results == 1


def test_a_new_open_closes_a_generation_left_open(gens: Generations) -> None:
    gens.report(1, _result(0))
    second = gens.open(_open_request("r2"), POLICY, lambda n: n)
    assert second.number == 2 and gens.closed is not None and gens.closed.number == 1
    assert gens.report(1, _result(1)) == "late"


def test_unknown_numbers_and_members_are_refused(gens: Generations) -> None:
    with pytest.raises(Invalid, match="does not exist yet"):
        gens.report(2, _result(0))
    with pytest.raises(Invalid, match="member 4 does not exist"):
        gens.report(1, _result(4))
    gens.close(1, 1.0, force=True)
    gens.open(_open_request("r2"), POLICY, lambda n: n)
    gens.close(2, 1.0, force=True)
    gens.open(_open_request("r3"), POLICY, lambda n: n)
    with pytest.raises(NotFound, match="closed long ago"):
        gens.close(1, 1.0, force=True)


def test_the_journal_state_keeps_acknowledged_results_counters_and_claims(gens: Generations) -> None:
    gens.report(1, _result(0, 42.0))
    gens.report(1, _result(0, 42.0))
    restored = Generations()
    restored.load_state_dict(Stored(gens.state_dict()), now=500.0)
    assert restored.current is not None and restored.current.results[0].mean_return == 42.0
    assert restored.last_number == 1 and restored.duplicate_results == 1 and restored.results_accepted == 1
    assert restored.report(1, _result(0)) == "duplicate"
    # claims are journalled: the members held before the restart stay with their claimant, under a fresh lease
    assert restored.claim("c2", 500.0) is None
    assert restored.report(1, _result(1)) == "accepted"
    assert restored.claim("c2", 500.0 + PERTURBATION.lease_seconds) is not None  # lapsed: offered again
    Generations().load_state_dict(Stored(), now=0.0)  # a journal from before generations existed


def test_opening_claiming_reporting_and_closing_mark_the_state_and_reads_do_not() -> None:
    g = Generations()
    g.open(_open_request(), POLICY, lambda n: n)
    assert g.pending.dirty
    g.pending.clear()
    _claim_all(g, "collector-1")
    assert g.pending.dirty  # the claimant is journalled
    g.pending.clear()
    g.claimable(0.0)
    g.ready(1, 0.5)
    g.find(1)
    g.status(0.0)
    g.open(_open_request(), POLICY, lambda n: n)  # a retried open
    assert not g.pending.dirty
    g.report(1, _result(0))
    assert g.pending.dirty
    g.pending.clear()
    assert g.close(1, 1.0, force=False) is None and not g.pending.dirty  # stays open: nothing changed
    g.close(1, 1.0, force=True)
    assert g.pending.dirty and g.pending.rows == []


def test_the_open_and_the_last_closed_generation_survive_a_round_trip(tmp_path: Path) -> None:
    g = Generations()
    journal = JournalFor(tmp_path / "journal.sqlite", g)
    g.open(_open_request("r1"), POLICY, lambda n: 1000 + n)
    _claim_all(g)
    g.report(1, _result(0, 5.0))
    g.close(1, 0.25, force=False)
    g.report(1, _result(1))  # late
    g.open(_open_request("r2"), POLICY, lambda n: 1000 + n)
    _claim_all(g)
    g.report(2, _result(3, 7.0))
    journal.commit()
    restored = journal.restore(Generations(), now=0.0)
    assert restored.state_dict() == g.state_dict()
    assert restored.open(_open_request("r2"), POLICY, lambda n: n).seed == 1002  # a retried open, same one
    assert restored.report(1, _result(1)) == "duplicate"  # the late member is recognised
    closed = restored.close(2, 0.25, force=False)
    assert closed is not None and closed.results[3].mean_return == 7.0


def test_a_journal_from_before_generations_loads_with_none() -> None:
    g = Generations()
    g.load_state_dict(Stored(), now=0.0)
    assert (g.current, g.closed, g.last_number) == (None, None, 0)
    assert g.open(_open_request(), POLICY, lambda n: n).number == 1


def test_a_reoffered_member_marks_its_count(gens: Generations) -> None:
    gens.pending.clear()
    gens.claim("c2", now=PERTURBATION.lease_seconds)  # member 0's lease ran out: offered again
    assert gens.members_reoffered == 1 and gens.pending.dirty
