"""The data plane: the replay buffer's metadata, the rate limiter, ingest counters and sampling.

Collectors' chunks come in (`ingest`), the learner's draws go out (`sample`), priorities and corruption
reports come back. Each operation changes memory and returns the journal statements that make it durable;
payload files of chunks that left the buffer are returned for deletion once that is committed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coordinator import journal as jr
from coordinator.committer import Statement
from coordinator.errors import Invalid, NotEnoughData
from coordinator.ingest import IngestLedger
from coordinator.journal import ReplayRecord, Snapshot
from coordinator.lag import LagStats
from coordinator.ratelimit import RateLimiter
from coordinator.replay.buffer import Entry, ReplayBuffer, Sampled
from shared.config.run_config import RunConfig
from shared.wire import BufferStatus, ChunkReport, SampledChunk, SampleRequest, SampleResponse

BUFFER_ID = "replay-0"


@dataclass
class Change:
    """What an operation did: statements to commit, meta to write, chunks whose payloads may now go."""

    statements: list[Statement] = field(default_factory=list)
    gone: list[Entry] = field(default_factory=list)
    replay: ReplayRecord | None = None


class DataPlane:
    def __init__(self, config: RunConfig, idempotency_seconds: float, max_ids: int) -> None:
        self.config = config
        self.buffer = ReplayBuffer(BUFFER_ID, config.replay, config.sampling)
        self.queue = config.replay.sampler in ("fifo", "lifo")
        # A deterministic run has no slack: a draw cannot start before the chunk that allows it is in
        # (learner_worker/lockstep.py), and its one collector is paced by policies, never paused.
        self.limiter = RateLimiter(config.replay.min_transitions, config.replay.samples_per_insert,
                                   0 if config.deterministic else config.replay.tolerance_transitions)
        self.lag = LagStats()
        self.rng = np.random.default_rng(config.seed)
        self.ledger = IngestLedger(idempotency_seconds, max_ids)
        self.producers: dict[str, str] = {}  # chunk id in the buffer -> the worker that reported it
        # chunk id in the buffer -> its wire form, built on its first draw: a draw of 1,024 transitions names
        # ~1,000 chunks, and building their models anew took an eighth of the coordinator's loop at 1,000
        # collectors
        self._refs: dict[str, SampledChunk] = {}
        self.replies: dict[str, tuple[str, str]] = {}  # learner worker id -> (request id, last sample reply)
        self.chunks = self.env_steps = self.episodes = self.duplicate_chunks = self.env_errors = 0
        self.corrupt_chunks = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.games: dict[str, list[int]] = {}  # two-player games: opponent kind -> [won, drawn, lost]

    # ----- ingest ------------------------------------------------------------------------------------------
    def ingest(self, reports: list[ChunkReport], latest_version: int, acked_at: float) -> Change:
        """Acknowledge checked, new chunks: count them, add them to the buffer (one pass for all), drop what fell
        out."""
        entries = []
        for report in reports:
            self.ledger.add(report.chunk_id, report.sha256, acked_at)
            self.chunks += 1
            self.env_steps += report.env_steps
            self.episodes += len(report.episodes)
            self.env_errors += report.env_errors
            self.recent_returns.extend(ep.ret for ep in report.episodes)
            self._tally(report)
            entries.append(Entry(report.chunk_id, report.payload_path, report.sha256, report.env_steps,
                                 report.policy_version, report.num_envs, tuple(report.ends),
                                 tuple(report.fresh_columns)))
            self.lag.ingested(latest_version - report.policy_version)
            self.limiter.inserted += report.env_steps
            self.producers[report.chunk_id] = report.worker_id
        added, gone = self.buffer.add_many(entries)
        gone += self.buffer.remove_stale(latest_version, self.config.max_staleness)
        rows = [jr.chunk_row(c.entry, c.base_id, c.initial_leaf, r.worker_id, acked_at)
                for c, r in zip(added, reports, strict=True)]
        return self._forget(Change(rows, gone))

    def _tally(self, report: ChunkReport) -> None:
        """Count won / drawn / lost training games by the kind of opponent (pool versions together as `pool`)."""
        for ep in report.episodes:
            if ep.opponent is not None:
                kind = "pool" if ep.opponent.startswith("v") else ep.opponent
                self.games.setdefault(kind, [0, 0, 0])[0 if ep.ret > 0 else 1 if ep.ret == 0 else 2] += 1

    def count_rollouts(self, env_steps: int, episodes: int, mean_return: float) -> None:
        """Count env steps and episodes that reached the run without a chunk (population members' results)."""
        self.env_steps += env_steps
        self.episodes += episodes
        if episodes:
            self.recent_returns.append(mean_return)

    def _forget(self, change: Change) -> Change:
        for entry in change.gone:
            self.producers.pop(entry.chunk_id, None)
            self._refs.pop(entry.chunk_id, None)
        change.statements += jr.chunks_gone(change.gone)
        return change

    def remove_stale(self, latest_version: int) -> Change:
        return self._forget(Change(gone=self.buffer.remove_stale(latest_version, self.config.max_staleness)))

    def remove_corrupt(self, chunk_id: str) -> tuple[str | None, Change]:
        """Drop a chunk a learner found unusable; (the worker that reported it, or None if gone already)."""
        chunk = self.buffer.by_id.get(chunk_id)
        if chunk is None:
            return None, Change()
        producer = self.producers.get(chunk_id)
        self.corrupt_chunks += 1
        return producer, self._forget(Change(gone=[self.buffer.drop(chunk)]))

    # ----- sampling ----------------------------------------------------------------------------------------
    def sample_size(self, request: SampleRequest) -> tuple[int, int | None, int, int]:
        """(items to draw, step cap, steps the draw needs, steps a queue hopes for) for a request. Fixed-length
        units must fit the batch bounds; episodes and chunks are whole, as many as fit under max_batch_size."""
        sampling = self.config.sampling
        count = request.batch_size * request.num_batches
        item_len = {"transition": 1, "sequence": sampling.sequence_length}.get(sampling.unit)
        if item_len is None:
            hoped = sampling.max_batch_size if self.queue else sampling.min_batch_size
            return count, sampling.max_batch_size, sampling.min_batch_size, hoped
        steps = count * item_len
        if not sampling.min_batch_size <= steps <= sampling.max_batch_size:
            raise Invalid(f"a sample of {count} {sampling.unit}s ({steps} transitions) is outside the configured "
                          f"batch bounds [{sampling.min_batch_size}, {sampling.max_batch_size}] transitions")
        return count, None, steps, steps

    def servable(self, steps: int) -> bool:
        """Queues need that many fresh steps; replay needs the rate limiter's permission."""
        if self.queue:
            return self.buffer.item_steps >= steps
        return self.buffer.items > 0 and self.limiter.can_sample(steps)

    def collectors_ahead(self) -> bool:
        """A queue (on-policy) pauses collectors on backlog; a replay buffer on the samples-per-insert ratio."""
        if self.config.deterministic:
            return False
        if self.queue:
            return self.buffer.item_steps >= self.config.replay.tolerance_transitions
        return self.limiter.collectors_ahead()

    def retried(self, worker_id: str, request_id: str | None) -> str | None:
        """The reply (JSON) already sent for this request id, if this is a retry of the worker's last sample."""
        last = self.replies.get(worker_id)
        return last[1] if last is not None and request_id is not None and last[0] == request_id else None

    def sample(self, request: SampleRequest, latest_version: int) -> tuple[Sampled, Change]:
        count, step_cap, needed, _ = self.sample_size(request)
        if not self.servable(needed):
            raise NotEnoughData(self._not_enough_message())
        drawn = self.buffer.sample(self.rng, count, self.beta(), step_cap)
        self.limiter.sampled += int(drawn.lengths.sum())
        versions = np.array([c.entry.policy_version for c in drawn.chunks], np.int64)
        self.lag.sampled(latest_version - versions[drawn.chunk_index])
        change = Change(gone=list(drawn.gone))
        if self.config.replay.max_use is not None and len(drawn.ids):
            change.replay = ReplayRecord("use", drawn.ids)
        return drawn, self._forget(change)

    def remember_reply(self, worker_id: str, request_id: str | None, body: str) -> list[Statement]:
        if request_id is None:
            return []
        self.replies[worker_id] = (request_id, body)
        return [jr.reply_row(worker_id, request_id, body)]

    def response(self, drawn: Sampled, batch_size: int, directive: Any) -> SampleResponse:
        return SampleResponse(
            unit=self.config.sampling.unit,
            chunks=[self._ref(c.entry) for c in drawn.chunks],
            chunk_index=drawn.chunk_index.tolist(), offsets=drawn.offsets.tolist(), lengths=drawn.lengths.tolist(),
            ids=drawn.ids.tolist(), weights=drawn.weights.tolist(), batch_size=batch_size,
            buffer_transitions=self.buffer.transitions, directive=directive)

    def _ref(self, entry: Entry) -> SampledChunk:
        ref = self._refs.get(entry.chunk_id)
        if ref is None:
            ref = self._refs[entry.chunk_id] = SampledChunk(
                chunk_id=entry.chunk_id, payload_path=entry.payload_path, sha256=entry.sha256,
                policy_version=entry.policy_version, num_envs=entry.num_envs)
        return ref

    def beta(self) -> float:
        replay = self.config.replay
        return replay.beta_start + (1 - replay.beta_start) * min(1.0, self.limiter.sampled / replay.beta_horizon)

    def _not_enough_message(self) -> str:
        replay, sampling = self.config.replay, self.config.sampling
        if self.queue:
            return (f"the queue holds {self.buffer.item_steps} fresh transitions, fewer than "
                    f"sampling.min_batch_size={sampling.min_batch_size} after "
                    f"{sampling.max_wait_seconds:g}s. Retry shortly.")
        return (f"buffer has {self.limiter.inserted} inserted transitions (needs {replay.min_transitions}), "
                f"{self.buffer.items} {sampling.unit}s to serve and {self.limiter.sampled} sampled; the learner is "
                f"ahead of samples_per_insert={self.limiter.spi}. Retry shortly.")

    def update_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> tuple[int, ReplayRecord]:
        unknown = ids >= self.buffer.head
        if unknown.any():
            raise Invalid(f"{int(unknown.sum())} ids were never issued by this buffer (e.g. "
                          f"{int(ids[unknown][0])}; the next id is {self.buffer.head})")
        updated = self.buffer.update_priorities(ids, priorities)
        return updated, ReplayRecord("priority", ids, priorities)

    def snapshot_record(self) -> ReplayRecord:
        ids, leaves, uses = self.buffer.priority_state()
        return ReplayRecord("snapshot", ids, leaves, uses, self.buffer.head)

    # ----- persistence and status --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        b = self.buffer
        return {"chunks": self.chunks, "env_steps": self.env_steps, "episodes": self.episodes,
                "duplicate_chunks": self.duplicate_chunks, "env_errors": self.env_errors,
                "corrupt_chunks": self.corrupt_chunks, "recent_returns": list(self.recent_returns),
                "inserted": self.limiter.inserted, "sampled": self.limiter.sampled, "head": b.head,
                "max_priority": b.max_priority, "evicted_chunks": b.evicted_chunks,
                "removed_max_use": b.removed_max_use, "removed_stale": b.removed_stale,
                "unservable": b.unservable, "lag": self.lag.state(), "games": self.games}

    def load(self, state: dict[str, Any], snap: Snapshot) -> list[Entry]:
        """Restore counters, the idempotency window and the buffer; returns chunks found gone meanwhile."""
        for key in ("chunks", "env_steps", "episodes", "duplicate_chunks", "env_errors", "corrupt_chunks"):
            setattr(self, key, int(state[key]))
        self.recent_returns.extend(state["recent_returns"])
        self.games = {kind: list(map(int, counts)) for kind, counts in state.get("games", {}).items()}
        self.limiter.inserted, self.limiter.sampled = int(state["inserted"]), int(state["sampled"])
        for chunk_id, sha, acked_at in snap.acked:
            self.ledger.add(chunk_id, sha, acked_at)
        self.replies = {worker: (request, body) for worker, request, body in snap.replies}
        gone = self._restore_buffer(state, snap)
        self.lag.restore(state["lag"])
        return gone

    def _restore_buffer(self, state: dict[str, Any], snap: Snapshot) -> list[Entry]:
        """Re-insert the kept chunks at their ring positions with their initial priorities, free rows that
        chunks no longer kept had overwritten, then replay the buffer log (snapshot, priorities, draws)."""
        buffer = self.buffer
        for entry, base_id, leaf, worker_id in snap.buffer:
            buffer.head = base_id
            buffer.add(entry, initial_leaf=leaf)
            self.producers[entry.chunk_id] = worker_id
        buffer.head = int(state["head"])
        gone = buffer.expire_below(buffer.head - buffer.capacity)
        for record in snap.replay_log:
            if record.kind == "snapshot":
                assert record.values is not None and record.uses is not None and record.head is not None
                gone += buffer.apply_priority_state(record.ids, record.values, record.uses, record.head)
            elif record.kind == "priority":
                assert record.values is not None
                buffer.update_priorities(record.ids, record.values)
            else:
                gone += buffer.apply_uses(record.ids)
        for name in ("evicted_chunks", "removed_max_use", "removed_stale", "unservable"):
            setattr(buffer, name, int(state[name]))
        buffer.max_priority = float(state["max_priority"])
        for entry in gone:
            self.producers.pop(entry.chunk_id, None)
        return gone

    def status(self) -> BufferStatus:
        b = self.buffer
        return BufferStatus(
            buffer_id=b.buffer_id, sampler=self.config.replay.sampler, unit=self.config.sampling.unit,
            chunks=len(b), transitions=b.transitions, items=b.items, capacity_transitions=b.capacity,
            evicted_chunks=b.evicted_chunks, removed_max_use=b.removed_max_use, removed_stale=b.removed_stale,
            max_priority=b.max_priority, beta=self.beta() if b.prioritized else 1.0,
            inserted_transitions=self.limiter.inserted, sampled_transitions=self.limiter.sampled,
            samples_per_insert=self.limiter.spi, tolerance_transitions=self.limiter.tolerance,
        )
