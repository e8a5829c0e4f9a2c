"""Generations of a population-based learner: members offered under leases, results taken exactly once.

The learner opens a generation (a published policy, its perturbation settings and members); collectors claim
members one at a time, each under a lease: a collector that dies loses only that member, which is offered
again once its lease runs out. A result is taken from the member's claimant only: a worker that never claimed
the member, or whose lapsed lease took the member to another worker, is refused (409 member_not_held). A result
is applied once (a repeated report of a member is a duplicate); a result for the last closed generation is
acknowledged and counted as late, once, never applied. A result for a generation closed before that is refused
as well: nothing is left to tell a retry from a first report by, so it could not be counted only once. The
learner closes a generation once enough members have reported (or its own timeout passed) and takes the
results.

Journalled with its own state (`state_dict`): the open generation with its results so far and who holds each
member, and the last closed one (a retried close gets the same results; a late repeat is recognised). A
coordinator restart gives every held member a fresh lease, so a collector that claimed before the restart
still reports it. Generation numbers are issued here, so they keep increasing across learner restarts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rlfleet.coordinator.errors import Conflict, Invalid, MemberNotHeld, NotFound
from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.wire import (
    GenerationOpen,
    MemberOutcome,
    MemberResult,
    MemberSpec,
    Perturbation,
    PolicyRef,
    PopulationStatus,
)

Verdict = Literal["accepted", "duplicate", "late"]


@dataclass
class Generation:
    number: int
    request_id: str
    policy: PolicyRef
    perturbation: Perturbation
    members: list[MemberSpec]
    seed: int
    results: dict[int, MemberOutcome] = field(default_factory=dict)
    # member -> (worker, lease deadline): its last claimant, kept (a lapsed lease included) until it reports or
    # the member goes to another worker, and after the close (a late result is taken from it alone)
    holders: dict[int, tuple[str, float]] = field(default_factory=dict)
    late: set[int] = field(default_factory=set)  # members reported after the close (last closed one only)

    def needed(self, min_fraction: float) -> int:
        return max(1, math.ceil(min_fraction * len(self.members) - 1e-9))

    def state_dict(self) -> dict[str, Any]:
        return {"number": self.number, "request_id": self.request_id, "policy": self.policy.model_dump(),
                "perturbation": self.perturbation.model_dump(), "seed": self.seed,
                "members": [[m.noise_index, m.sign] for m in self.members],
                "results": [r.model_dump() for r in self.results.values()], "late": sorted(self.late),
                "holders": [[member, worker] for member, (worker, _) in sorted(self.holders.items())]}

    @classmethod
    def from_state(cls, state: dict[str, Any], now: float) -> Generation:
        """The generation as journalled; each held member under a fresh lease from `now` (lease deadlines are on
        the clock of the process that wrote them)."""
        results = [MemberOutcome.model_validate(r) for r in state["results"]]
        perturbation = Perturbation.model_validate(state["perturbation"])
        holders = {int(m): (str(w), now + perturbation.lease_seconds) for m, w in state.get("holders", [])}
        return cls(int(state["number"]), state["request_id"], PolicyRef.model_validate(state["policy"]),
                   perturbation, [MemberSpec(noise_index=i, sign=s) for i, s in state["members"]],
                   int(state["seed"]), {r.member: r for r in results}, holders, set(state["late"]))


class Generations:
    key: ClassVar[str] = "generations"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self) -> None:
        self.pending = Pending()
        self.current: Generation | None = None  # the open generation
        self.closed: Generation | None = None  # the last closed one
        self.last_number = 0
        self.generations_closed = self.results_accepted = self.late_results = 0
        self.duplicate_results = self.members_reoffered = 0
        self.last_fraction = 0.0

    # ----- the learner ------------------------------------------------------------------------------------
    def open(self, request: GenerationOpen, latest: PolicyRef | None, seed_of: Callable[[int], int]) -> Generation:
        """Open the next generation of the `latest` policy (a retry of the same request gets the same one back).
        An open generation the learner never closed (it restarted) is closed as it stands: its results can only
        be late now."""
        for known in (self.current, self.closed):
            if known is not None and known.request_id == request.request_id:
                if known.members != request.members or known.policy.version != request.policy_version:
                    raise Conflict(f"request id {request.request_id!r} opened generation {known.number} with other "
                                   "members; use a fresh request id for a new generation")
                return known
        if latest is None or latest.version != request.policy_version:
            raise Conflict(f"a generation perturbs the latest published policy (v{latest.version if latest else 0}), "
                           f"not v{request.policy_version}: publish it first")
        policy = latest
        if self.current is not None:
            self._close(self.current)
        self.last_number += 1
        self.current = Generation(self.last_number, request.request_id, policy, request.perturbation,
                                  list(request.members), seed_of(self.last_number))
        self.pending.mark()
        return self.current

    def ready(self, number: int, min_fraction: float) -> bool:
        """Whether the close of `number` can be answered now: enough results in, or nothing left to wait for."""
        current = self.current
        if current is None or current.number != number:
            return True
        return len(current.results) >= current.needed(min_fraction)

    def close(self, number: int, min_fraction: float, force: bool) -> Generation | None:
        """Close generation `number` if it has `min_fraction` of its results (or `force`); the closed generation,
        or None while it stays open. Closing the last closed generation again returns it (a retry)."""
        generation = self.find(number)
        if generation is None:
            raise NotFound(f"generation {number} closed long ago; its results are gone")
        if generation is self.closed:
            return generation
        current = generation
        if not force and len(current.results) < current.needed(min_fraction):
            return None
        self._close(current)
        return current

    def _close(self, generation: Generation) -> None:
        self.closed, self.current = generation, None
        self.generations_closed += 1
        self.last_fraction = len(generation.results) / len(generation.members)
        self.pending.mark()

    def find(self, number: int) -> Generation | None:
        """The generation `number` names: the open one, the last closed one, or None for an older one; refuses
        a number never issued."""
        if number > self.last_number:
            raise Invalid(f"generation {number} does not exist yet (the latest is {self.last_number}); report "
                          "members of a generation you claimed")
        for known in (self.current, self.closed):
            if known is not None and known.number == number:
                return known
        return None

    # ----- collectors -------------------------------------------------------------------------------------
    def claim(self, worker_id: str, now: float) -> tuple[Generation, int] | None:
        """The next member to evaluate: one never claimed, or one whose lease ran out (offered again)."""
        current = self.current
        if current is None:
            return None
        for member in range(len(current.members)):
            if member in current.results:
                continue
            holder = current.holders.get(member)
            if holder is not None and holder[1] > now:
                continue
            if holder is not None:
                self.members_reoffered += 1
            current.holders[member] = (worker_id, now + current.perturbation.lease_seconds)
            self.pending.mark()  # the claimant is journalled: only its result is taken, after a restart too
            return current, member
        return None

    def claimable(self, now: float) -> bool:
        current = self.current
        return current is not None and any(
            m not in current.results and (m not in current.holders or current.holders[m][1] <= now)
            for m in range(len(current.members)))

    def report(self, number: int, result: MemberResult) -> Verdict:
        """The verdict on a member's result (each counted): accepted, a duplicate of one taken before, or late.
        Refuses (MemberNotHeld) a result from a worker that does not hold the member, and one for a generation
        closed before the last: it could not be told from a retry, so counting it would count retries again."""
        generation = self.find(number)
        if generation is None:
            raise MemberNotHeld(f"generation {number} closed before the last one (generation "
                                f"{self.closed.number if self.closed else 0}): its results are no longer kept, so "
                                "this one can be neither applied nor told from a retry; drop it and claim a new "
                                "member")
        if result.member >= len(generation.members):
            raise Invalid(f"member {result.member} does not exist: generation {number} has "
                          f"{len(generation.members)} members")
        if result.member in generation.results or result.member in generation.late:
            self.duplicate_results += 1
            self.pending.mark()
            return "duplicate"
        holder = generation.holders.get(result.member)
        if holder is None or holder[0] != result.worker_id:
            raise MemberNotHeld(
                f"worker {result.worker_id!r} does not hold member {result.member} of generation {number}: "
                + ("nobody claimed it" if holder is None else "its lease ran out and another worker claimed it")
                + "; drop this result and claim a member (POST /v1/generations/claim)")
        self.pending.mark()  # every verdict is counted
        if generation is not self.current:
            generation.late.add(result.member)
            self.late_results += 1
            return "late"
        spec = generation.members[result.member]
        generation.results[result.member] = MemberOutcome(
            member=result.member, noise_index=spec.noise_index, sign=spec.sign, mean_return=result.mean_return,
            mean_length=result.mean_length)
        generation.holders.pop(result.member, None)
        self.results_accepted += 1
        return "accepted"

    # ----- persistence and status -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"current": None if self.current is None else self.current.state_dict(),
                "closed": None if self.closed is None else self.closed.state_dict(),
                "last_number": self.last_number, "generations_closed": self.generations_closed,
                "results_accepted": self.results_accepted, "late_results": self.late_results,
                "duplicate_results": self.duplicate_results, "members_reoffered": self.members_reoffered,
                "last_fraction": self.last_fraction}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        """Restore (journals of runs before population evaluation existed have no state: nothing to restore)."""
        state = stored.meta
        if state is None:
            return
        self.current = None if state["current"] is None else Generation.from_state(state["current"], now)
        self.closed = None if state["closed"] is None else Generation.from_state(state["closed"], now)
        self.last_number = int(state["last_number"])
        for key in ("generations_closed", "results_accepted", "late_results", "duplicate_results",
                    "members_reoffered"):
            setattr(self, key, int(state[key]))
        self.last_fraction = float(state["last_fraction"])

    def status(self, now: float) -> PopulationStatus:
        shown = self.current or self.closed
        claimed = 0 if self.current is None else sum(1 for _, deadline in self.current.holders.values()
                                                     if deadline > now)
        return PopulationStatus(
            generation=shown.number if shown else 0, open=self.current is not None,
            population=len(shown.members) if shown else 0, received=len(shown.results) if shown else 0,
            claimed=claimed, generations_closed=self.generations_closed, results_accepted=self.results_accepted,
            late_results=self.late_results, duplicate_results=self.duplicate_results,
            members_reoffered=self.members_reoffered, last_fraction=self.last_fraction)
