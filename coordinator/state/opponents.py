"""The opponent pool of a self-play run: earlier policy versions that games are played against.

Every `self_play.every_versions`-th published version joins; the newest `pool_size` stay. A version in the pool
is pinned: when the policy book drops it (it keeps only the newest `keep_policies`), its file stays in the store
until the pool lets it go too, so a collector or the evaluator drawing it always finds it. The pool is
journalled (meta key `pool`) with the publish that changed it, so a restarted coordinator serves the same
opponents.
"""

from __future__ import annotations

from typing import ClassVar

from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.config.battle import SelfPlayConfig
from rlfleet.shared.wire import OpponentPool, PolicyRef, SelfPlayStatus, Tally


class Opponents:
    key: ClassVar[str] = "pool"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self, config: SelfPlayConfig | None) -> None:
        self.config = config
        self.pending = Pending()
        self.pool: list[PolicyRef] = []
        self.missing = 0  # pool versions whose file was found gone from the store (deleted outside rlfleet)

    @property
    def enabled(self) -> bool:
        return self.config is not None

    def holds(self, version: int) -> bool:
        return any(p.version == version for p in self.pool)

    def published(self, policy: PolicyRef) -> list[PolicyRef]:
        """Take a newly published version in if it is due; the versions that left the pool."""
        if self.config is None or policy.version % self.config.every_versions:
            return []
        self.pool.append(policy)
        self.pending.mark()
        left, self.pool = self.pool[:-self.config.pool_size], self.pool[-self.config.pool_size:]
        return left

    def forget(self, gone: list[PolicyRef]) -> None:
        self.pool = [p for p in self.pool if p not in gone]
        self.missing += len(gone)
        self.pending.mark()

    def unpinned(self, dropped: list[PolicyRef], left: list[PolicyRef], book: set[int]) -> list[str]:
        """Policy files to delete now: versions the book dropped that the pool does not hold, and versions that
        left the pool which the book no longer holds."""
        gone = [p for p in dropped if not self.holds(p.version)] + [p for p in left if p.version not in book]
        return list(dict.fromkeys(p.path for p in gone))

    def reply(self, latest: PolicyRef | None) -> OpponentPool:
        assert self.config is not None
        return OpponentPool(latest=latest, pool=list(self.pool), weights=dict(self.config.weights))

    def status(self, training: dict[str, list[int]], latest_elo: float | None,
               best_elo: float | None) -> SelfPlayStatus | None:
        if self.config is None:
            return None
        return SelfPlayStatus(
            pool_versions=[p.version for p in self.pool],
            training={kind: Tally(wins=w, draws=d, losses=lost) for kind, (w, d, lost) in sorted(training.items())},
            pool_missing=self.missing, latest_elo=latest_elo, best_elo=best_elo)

    def state_dict(self) -> dict | None:
        if self.config is None:
            return None
        return {"pool": [p.model_dump(mode="json") for p in self.pool], "missing": self.missing}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta or {}
        self.pool = [PolicyRef.model_validate(p) for p in state.get("pool", [])]
        self.missing = int(state.get("missing", 0))
