"""What a chunk report must satisfy before it is acknowledged, and which chunk ids were already acknowledged.

Checks are the cheap ones (no payload read): the layout the run's config declares, ends and episodes that
fit the chunk, a policy version that exists. The learner verifies the payload itself (hash, decode, shapes)
and reports corrupt ones.

The ledger remembers acknowledged ids for a window (time, with a hard cap on count) rather than forever:
a collector retries a report for at most its `max_unavailable_seconds`, so an id older than the window can
never come back as a retry, and memory and the journal stay bounded however long the run.
"""

from __future__ import annotations

from collections import OrderedDict

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.wire import ChunkReport


def check_report(report: ChunkReport, config: RunConfig, latest_version: int) -> None:
    """Refuse a report whose metadata cannot describe a chunk of this run (422 naming the field). The run
    config already guarantees such a chunk fits the buffer and the wire (shared/config/run_config.py)."""
    expected = chunk_path(report.task_id, report.chunk_id)
    if report.payload_path != expected:
        raise Invalid(f"payload_path must be {expected!r} for this task and chunk id")
    envs, rows = config.collector.num_envs, report.env_steps
    if report.num_envs != envs:
        raise Invalid(f"num_envs is {report.num_envs}; this run's collectors step collector.num_envs={envs}")
    if rows % envs:
        raise Invalid(f"env_steps ({rows}) must be a multiple of num_envs ({envs}): rows are steps x envs")
    steps, declared = rows // envs, config.collector.chunk_steps
    if config.sampling.n_episode is None and steps != declared:
        raise Invalid(f"env_steps ({rows}) must be num_envs x collector.chunk_steps = {envs * declared}")
    if steps > declared:
        raise Invalid(f"env_steps ({rows}) exceeds num_envs x collector.chunk_steps = {envs * declared}")
    ends = report.ends
    if ends and (ends[-1] >= rows or any(b <= a for a, b in zip(ends, ends[1:], strict=False))):
        raise Invalid(f"ends must be strictly ascending row indices below env_steps ({rows})")
    if len(report.episodes) > len(ends):
        raise Invalid(f"{len(report.episodes)} episodes reported but only {len(ends)} episode ends")
    if report.env_errors > len(ends):
        raise Invalid(f"env_errors ({report.env_errors}) exceeds the episode ends ({len(ends)}): every env error "
                      "ends its episode")
    if any(col >= envs for col in report.fresh_columns) or len(set(report.fresh_columns)) != len(report.fresh_columns):
        raise Invalid(f"fresh_columns must be distinct env columns below num_envs ({envs})")
    if report.policy_version > latest_version:
        raise Invalid(f"policy_version {report.policy_version} was never published (latest: {latest_version})")


class IngestLedger:
    """Acknowledged chunk ids (with their sha256) inside the idempotency window, oldest first."""

    def __init__(self, window_seconds: float, max_ids: int) -> None:
        self.window_seconds = window_seconds
        self.max_ids = max_ids
        self._acked: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._acked)

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self._acked

    def sha256(self, chunk_id: str) -> str | None:
        known = self._acked.get(chunk_id)
        return known[0] if known else None

    def seen(self, chunk_id: str, sha256: str) -> bool:
        """True for a retry of an acknowledged report; a reused id with other content is a conflict."""
        known = self._acked.get(chunk_id)
        if known is None:
            return False
        if known[0] != sha256:
            raise Conflict(f"chunk {chunk_id!r} was already acknowledged with different content")
        return True

    def add(self, chunk_id: str, sha256: str, acked_at: float) -> None:
        self._acked[chunk_id] = (sha256, acked_at)
        while len(self._acked) > self.max_ids:
            self._acked.popitem(last=False)

    def expire(self, now: float) -> float:
        """Forget ids acknowledged before the window; returns the cut-off time."""
        cutoff = now - self.window_seconds
        while self._acked and next(iter(self._acked.values()))[1] < cutoff:
            self._acked.popitem(last=False)
        return cutoff
