"""The policy book: published versions (strictly increasing, the newest few kept) and the latest one."""

from __future__ import annotations

from collections import deque

from coordinator import journal as jr
from coordinator.committer import Statement
from coordinator.errors import Conflict
from coordinator.journal import Snapshot
from shared.wire import PolicyRef


class PolicyBook:
    def __init__(self, keep: int) -> None:
        self.keep = keep
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

    def publish(self, policy: PolicyRef) -> tuple[bool, list[PolicyRef], list[Statement]]:
        """(is new, versions dropped from the book, statements). Republishing the latest is a no-op."""
        latest = self.latest
        if latest is not None and policy.version <= latest.version:
            if policy.version == latest.version and policy.sha256 == latest.sha256:
                return False, [], []
            raise Conflict(f"policy version {policy.version} is not newer than {latest.version}")
        self.versions.append(policy)
        dropped = []
        while len(self.versions) > self.keep:
            dropped.append(self.versions.popleft())
        return True, dropped, jr.policy_row(policy.version, policy.path, policy.sha256, [p.version for p in dropped])

    def load(self, snap: Snapshot) -> None:
        self.versions.extend(PolicyRef(version=v, path=path, sha256=sha) for v, path, sha in snap.policies)
        self.committed = self.latest
