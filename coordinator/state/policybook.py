"""The policy book: published versions (strictly increasing, the newest few kept) and the latest one.

It persists itself in the `policies` table (one row per version kept); it has no meta value. `committed` is the
newest version known durable: the one workers are told of.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from rlfleet.coordinator.errors import Conflict
from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.wire import PolicyRef


class PolicyBook:
    key: ClassVar[str] = "policies"
    tables: ClassVar[tuple[Table, ...]] = (
        Table("policies", "CREATE TABLE IF NOT EXISTS policies (version INTEGER PRIMARY KEY, path TEXT NOT NULL, "
              "sha256 TEXT NOT NULL);", "SELECT version, path, sha256 FROM policies ORDER BY version"),
    )

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.pending = Pending()
        self.versions: deque[PolicyRef] = deque()
        self.committed: PolicyRef | None = None  # the newest version known durable: the one workers are told of

    @property
    def latest(self) -> PolicyRef | None:
        return self.versions[-1] if self.versions else None

    @property
    def latest_version(self) -> int:
        return self.versions[-1].version if self.versions else 0

    @property
    def committed_version(self) -> int:
        return self.committed.version if self.committed else 0

    def mark_committed(self, policy: PolicyRef) -> None:
        if policy.version > self.committed_version:
            self.committed = policy

    def publish(self, policy: PolicyRef) -> tuple[bool, list[PolicyRef]]:
        """(is new, versions dropped from the book). Republishing the latest is a no-op."""
        latest = self.latest
        if latest is not None and policy.version <= latest.version:
            if policy.version == latest.version and policy.sha256 == latest.sha256:
                return False, []
            raise Conflict(f"policy version {policy.version} is not newer than {latest.version}")
        self.versions.append(policy)
        dropped = []
        while len(self.versions) > self.keep:
            dropped.append(self.versions.popleft())
        self.pending.rows.append(("INSERT OR REPLACE INTO policies (version, path, sha256) VALUES (?, ?, ?)",
                                  (policy.version, policy.path, policy.sha256)))
        self.pending.rows += [("DELETE FROM policies WHERE version=?", (p.version,)) for p in dropped]
        return True, dropped

    def state_dict(self) -> None:
        return None  # everything is in its table

    def load_state_dict(self, stored: Stored, now: float) -> None:
        self.versions.extend(PolicyRef(version=v, path=path, sha256=sha) for v, path, sha in stored.rows["policies"])
        self.committed = self.latest
