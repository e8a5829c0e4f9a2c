"""The data plane: the replay buffer's metadata, the rate limiter, ingest counters and sampling.

Collectors' chunks come in (`ingest`), the learner's draws go out (`sample`), priorities and corruption
reports come back. It persists itself (coordinator/journal/component.py): acknowledged chunks in the `chunks`
table (buffer rows while in the buffer, then only id and hash for the idempotency window), buffer events since
the last snapshot in `replay_log` (priority updates, counted draws, snapshots of every live item's leaf and
uses), each learner's last sample reply in `replies`, and its counters under the meta key `data`. Payload files
of chunks that left the buffer are freed once that is durable.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rlfleet.coordinator.errors import Conflict, Invalid, NotEnoughData
from rlfleet.coordinator.journal.committer import Statement
from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.coordinator.replay.buffer import Entry, ReplayBuffer, Sampled
from rlfleet.coordinator.state.ingest import IngestLedger
from rlfleet.coordinator.state.lag import LagStats
from rlfleet.coordinator.state.ratelimit import RateLimiter
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.samplers import samplers_where
from rlfleet.shared.wire import BufferStatus, ChunkReport, SampledChunk, SampleRequest, SampleResponse

BUFFER_ID = "replay-0"
SNAPSHOT_EVERY = 256  # replay-log records between buffer snapshots


@dataclass
class ReplayRecord:
    """One buffer event since the last snapshot: 'priority' (ids, priorities), 'use' (drawn ids) or 'snapshot'
    (ids, sum-tree leaves, uses of every live item when the next row id was `head`)."""

    kind: str
    ids: np.ndarray
    values: np.ndarray | None = None
    uses: np.ndarray | None = None
    head: int | None = None


class DataPlane:
    key: ClassVar[str] = "data"
    tables: ClassVar[tuple[Table, ...]] = (
        Table("chunks", """CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id TEXT UNIQUE NOT NULL, sha256 TEXT NOT NULL,
    payload_path TEXT NOT NULL, transitions INTEGER NOT NULL, policy_version INTEGER NOT NULL,
    num_envs INTEGER NOT NULL, ends TEXT NOT NULL, fresh TEXT NOT NULL, base_id INTEGER NOT NULL,
    initial_leaf REAL NOT NULL, in_buffer INTEGER NOT NULL, worker_id TEXT NOT NULL, acked_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_in_buffer ON chunks (in_buffer, seq);""",
              "SELECT chunk_id, sha256, payload_path, transitions, policy_version, num_envs, ends, fresh, base_id, "
              "initial_leaf, in_buffer, worker_id, acked_at FROM chunks ORDER BY seq"),
        Table("replay_log", "CREATE TABLE IF NOT EXISTS replay_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
              "kind TEXT NOT NULL, ids BLOB NOT NULL, vals BLOB, uses BLOB, head INTEGER);",
              "SELECT kind, ids, vals, uses, head FROM replay_log ORDER BY seq"),
        Table("replies", "CREATE TABLE IF NOT EXISTS replies (worker_id TEXT PRIMARY KEY, request_id TEXT NOT NULL, "
              "body TEXT NOT NULL);", "SELECT worker_id, request_id, body FROM replies"),
    )

    def __init__(self, config: RunConfig, idempotency_seconds: float, max_ids: int) -> None:
        self.config = config
        self.pending = Pending()
        self.replay_records = 0  # records in replay_log: counted as written, not queried
        self.buffer = ReplayBuffer(BUFFER_ID, config.replay, config.sampling)
        self.queue = config.replay.traits.queue
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
        # Payload bytes of acknowledged chunks and their env steps (chunks only: population members' rollouts
        # have none): bytes per env step is what a run's data costs the store, the disk and the learner's reads.
        self.payload_bytes = self.payload_env_steps = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.games: dict[str, list[int]] = {}  # two-player games: opponent kind -> [won, drawn, lost]

    # ----- ingest ------------------------------------------------------------------------------------------
    def ingest(self, reports: list[ChunkReport], latest_version: int, acked_at: float) -> None:
        """Acknowledge checked, new chunks: count them, add them to the buffer (one pass for all), drop what fell
        out."""
        entries = []
        for report in reports:
            self.ledger.add(report.chunk_id, report.sha256, acked_at)
            self.chunks += 1
            self.env_steps += report.env_steps
            self.payload_bytes += report.size_bytes
            self.payload_env_steps += report.env_steps
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
        self.pending.mark([chunk_row(c.entry, c.base_id, c.initial_leaf, r.worker_id, acked_at)
                           for c, r in zip(added, reports, strict=True)])
        self._forget(gone)

    @property
    def bytes_per_env_step(self) -> float | None:
        """Mean payload bytes per acknowledged env step; None before the first chunk."""
        return self.payload_bytes / self.payload_env_steps if self.payload_env_steps else None

    def count_duplicate(self) -> None:
        """A retried report of an acknowledged chunk (counted, nothing else changes)."""
        self.duplicate_chunks += 1
        self.pending.mark()

    def expire_ids(self, acked_before: float) -> None:
        """Forget chunk ids past the idempotency window (`acked_before`: wall-clock time) and the rows of chunks
        out of the buffer and out of that window: nothing needs them any more."""
        self.pending.mark([chunks_forgotten(self.ledger.expire(acked_before))])

    def reconfigure(self, config: RunConfig) -> None:
        """A live settings change: the sampling knobs and the limiter's ratio take effect at once."""
        self.config = config
        self.limiter.spi = config.replay.samples_per_insert

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
        self.pending.mark()

    def _forget(self, gone: list[Entry], free: bool = True) -> None:
        """Chunks that left the buffer: their rows leave it, and (unless a draw consumed them: their files
        outlive the draw by a grace period) their payload files are freed once that is durable."""
        for entry in gone:
            self.producers.pop(entry.chunk_id, None)
            self._refs.pop(entry.chunk_id, None)
        self.pending.mark(chunks_gone(gone))
        if free:
            self.pending.freed += [e.payload_path for e in gone]

    def remove_stale(self, latest_version: int) -> None:
        self._forget(self.buffer.remove_stale(latest_version, self.config.max_staleness))

    def remove_corrupt(self, chunk_id: str) -> tuple[bool, str | None]:
        """Drop a chunk a learner found unusable: (whether it was in the buffer, the worker that reported it)."""
        chunk = self.buffer.get(chunk_id)
        if chunk is None:
            return False, None
        producer = self.producers.get(chunk_id)
        self.corrupt_chunks += 1
        self._forget([self.buffer.drop(chunk)])
        return True, producer

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

    def sample(self, request: SampleRequest, latest_version: int) -> Sampled:
        """Draw for a request. Chunks the draw used up (max_use) leave the buffer but keep their files: the
        caller hands `drawn.gone` to the payload lifetime, which deletes them after a grace period."""
        count, step_cap, needed, _ = self.sample_size(request)
        if not self.servable(needed):
            raise NotEnoughData(self._not_enough_message())
        drawn = self.buffer.sample(self.rng, count, self.beta(), step_cap)
        self.limiter.sampled += int(drawn.lengths.sum())
        versions = np.array([c.entry.policy_version for c in drawn.chunks], np.int64)
        self.lag.sampled(latest_version - versions[drawn.chunk_index])
        if self.config.replay.max_use is not None and len(drawn.ids):
            self._log(ReplayRecord("use", drawn.ids))
        self._forget(list(drawn.gone), free=False)
        return drawn

    def remember_reply(self, worker_id: str, request_id: str | None, body: str) -> None:
        """Keep the learner's last reply, so a retry of that request gets it again."""
        if request_id is not None:
            self.replies[worker_id] = (request_id, body)
            self.pending.mark([("INSERT OR REPLACE INTO replies (worker_id, request_id, body) VALUES (?, ?, ?)",
                                (worker_id, request_id, body))])

    def forget_replies(self, worker_ids: list[str]) -> None:
        """Workers whose lease ran out: their last replies go with them."""
        for worker_id in worker_ids:
            self.replies.pop(worker_id, None)
        self.pending.mark([("DELETE FROM replies WHERE worker_id=?", (w,)) for w in worker_ids])

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
                policy_version=entry.policy_version, num_envs=entry.num_envs,
                env_steps=entry.transitions)
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

    def check_priorities_apply(self) -> None:
        """Refuse a priority update (409) unless the configured sampler takes priorities."""
        replay = self.config.replay
        if not replay.traits.priorities:
            raise Conflict(f"buffer {self.buffer.buffer_id!r} uses the {replay.sampler} sampler; priorities apply "
                           f"only to replay.sampler={' or '.join(samplers_where(priorities=True))}")

    def update_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> int:
        unknown = ids >= self.buffer.head
        if unknown.any():
            raise Invalid(f"{int(unknown.sum())} ids were never issued by this buffer (e.g. "
                          f"{int(ids[unknown][0])}; the next id is {self.buffer.head})")
        updated = self.buffer.update_priorities(ids, priorities)
        self._log(ReplayRecord("priority", ids, priorities))
        return updated

    def compact(self) -> None:
        """Once the replay log is long, replace it with one snapshot of every live item's leaf and uses."""
        if self.replay_records > SNAPSHOT_EVERY:
            ids, leaves, uses = self.buffer.priority_state()
            self._log(ReplayRecord("snapshot", ids, leaves, uses, self.buffer.head))

    def _log(self, record: ReplayRecord) -> None:
        """Append a buffer event to the replay log; a snapshot replaces every earlier event."""
        rows: list[Statement] = [("DELETE FROM replay_log", ())] if record.kind == "snapshot" else []
        rows.append(("INSERT INTO replay_log (kind, ids, vals, uses, head) VALUES (?, ?, ?, ?, ?)", (
            record.kind, record.ids.astype("<i8").tobytes(),
            None if record.values is None else record.values.astype("<f8").tobytes(),
            None if record.uses is None else record.uses.astype("<i4").tobytes(), record.head)))
        self.replay_records = 1 if record.kind == "snapshot" else self.replay_records + 1
        self.pending.mark(rows)

    # ----- persistence and status --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"chunks": self.chunks, "env_steps": self.env_steps, "episodes": self.episodes,
                "duplicate_chunks": self.duplicate_chunks, "env_errors": self.env_errors,
                "corrupt_chunks": self.corrupt_chunks, "payload_bytes": self.payload_bytes,
                "payload_env_steps": self.payload_env_steps, "recent_returns": list(self.recent_returns),
                "inserted": self.limiter.inserted, "sampled": self.limiter.sampled, **self.buffer.state_dict(),
                "lag": self.lag.state(), "games": self.games}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        """Restore counters, the idempotency window and the buffer. Chunks found gone meanwhile (only if the
        journal was cut between a draw and its removal) are removed, pending the next commit."""
        state, rows = stored.meta, stored.rows
        chunks = rows["chunks"]
        for key in ("chunks", "env_steps", "episodes", "duplicate_chunks", "env_errors", "corrupt_chunks"):
            setattr(self, key, int(state[key]))
        for key in ("payload_bytes", "payload_env_steps"):  # absent from a journal written before they were kept
            setattr(self, key, int(state.get(key, 0)))
        self.recent_returns.extend(state["recent_returns"])
        self.games = {kind: list(map(int, counts)) for kind, counts in state.get("games", {}).items()}
        self.limiter.inserted, self.limiter.sampled = int(state["inserted"]), int(state["sampled"])
        for row in chunks:
            self.ledger.add(row[0], row[1], row[12])
        self.replies = {worker: (request, body) for worker, request, body in rows["replies"]}
        kept = [(Entry(r[0], r[2], r[1], r[3], r[4], r[5], tuple(json.loads(r[6])), tuple(json.loads(r[7]))),
                 r[8], r[9], r[11]) for r in chunks if r[10]]
        log = [ReplayRecord(kind, np.frombuffer(ids, "<i8").astype(np.int64),
                            None if vals is None else np.frombuffer(vals, "<f8").astype(np.float64),
                            None if uses is None else np.frombuffer(uses, "<i4").astype(np.int32), head)
               for kind, ids, vals, uses, head in rows["replay_log"]]
        self.replay_records = len(log)
        gone = self._restore_buffer(state, kept, log)
        self.lag.restore(state["lag"])
        if gone:
            self._forget(gone)

    def _restore_buffer(self, state: dict[str, Any], kept: list[tuple[Entry, int, float, str]],
                        log: list[ReplayRecord]) -> list[Entry]:
        """Re-insert the kept chunks at their ring positions with their initial priorities, free rows that
        chunks no longer kept had overwritten, then replay the buffer log (snapshot, priorities, draws)."""
        buffer = self.buffer
        for entry, base_id, leaf, worker_id in kept:
            buffer.restore_chunk(entry, base_id, leaf)
            self.producers[entry.chunk_id] = worker_id
        gone = buffer.expire_below(int(state["head"]) - buffer.capacity)
        for record in log:
            if record.kind == "snapshot":
                assert record.values is not None and record.uses is not None and record.head is not None
                gone += buffer.apply_priority_state(record.ids, record.values, record.uses, record.head)
            elif record.kind == "priority":
                assert record.values is not None
                buffer.update_priorities(record.ids, record.values)
            else:
                gone += buffer.apply_uses(record.ids)
        buffer.load_state_dict(state)  # head, max_priority and the counters, as they were (the log moved them)
        for entry in gone:
            self.producers.pop(entry.chunk_id, None)
        return gone

    def status(self) -> BufferStatus:
        b = self.buffer
        return BufferStatus(
            buffer_id=b.buffer_id, sampler=self.config.replay.sampler, unit=self.config.sampling.unit,
            chunks=len(b), transitions=b.transitions, items=b.items, capacity_transitions=b.capacity,
            evicted_chunks=b.overwrite.evicted, removed_max_use=b.max_use.removed, removed_stale=b.staleness.removed,
            max_priority=b.max_priority, beta=self.beta() if self.config.replay.traits.weighted else 1.0,
            inserted_transitions=self.limiter.inserted, sampled_transitions=self.limiter.sampled,
            samples_per_insert=self.limiter.spi, tolerance_transitions=self.limiter.tolerance,
        )


def chunk_row(entry: Entry, base_id: int, initial_leaf: float, worker_id: str, acked_at: float) -> Statement:
    return ("INSERT INTO chunks (chunk_id, sha256, payload_path, transitions, policy_version, num_envs, ends, "
            "fresh, base_id, initial_leaf, in_buffer, worker_id, acked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (entry.chunk_id, entry.sha256, entry.payload_path, entry.transitions, entry.policy_version,
             entry.num_envs, json.dumps(entry.ends), json.dumps(entry.fresh_columns), base_id, initial_leaf,
             worker_id, acked_at))


def chunks_gone(entries: list[Entry], per_statement: int = 500) -> list[Statement]:
    """One statement per `per_statement` chunks (each statement costs the writer a GIL hand-off)."""
    ids = [e.chunk_id for e in entries]
    return [(f"UPDATE chunks SET in_buffer=0 WHERE chunk_id IN ({', '.join(['?'] * len(part))})", tuple(part))
            for part in (ids[i:i + per_statement] for i in range(0, len(ids), per_statement))]


def chunks_forgotten(acked_before: float) -> Statement:
    """Chunks out of the buffer and out of the idempotency window: nothing needs their row any more."""
    return "DELETE FROM chunks WHERE in_buffer=0 AND acked_at < ?", (acked_before,)
