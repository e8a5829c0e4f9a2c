"""What the dashboard polls: the run's recent history as compact rows, and its current state serialised once.

The housekeeping tick already builds the full status every second; the timeline keeps one row of it per tick
and the last status itself. A poll costs a bisect, a slice of new rows and a cached byte string, however many
browsers poll and however many workers the run has: the snapshot (with every worker) is serialised at most
once per tick, on the first poll that needs it, and not at all while nobody watches.
"""

from __future__ import annotations

import bisect
import csv
import json
import secrets
from pathlib import Path
from typing import Any

from rlfleet.shared.wire import EvaluationResult, HoldoutResult, Status

COLUMNS = ["seq", "wall_seconds", "env_steps", "env_steps_per_second", "recent_return_mean", "samples_per_insert",
           "buffer_fill", "policy_version", "losses"]
WORKER_COLUMNS = ["worker_id", "kind", "name", "task_id", "last_seen_seconds_ago", "restarts", "corrupt_chunks",
                  "flagged", "last_error"]
EVALUATION_COLUMNS = ["wall_seconds", "env_steps", "policy_version", "mean", "std"]
LIMIT = 2000  # rows kept; when full, the older half is thinned to every other row
PER_POLL = 1000  # rows, evaluations and tests sent in one reply at most; the page asks again for the rest


class Timeline:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.boot = secrets.token_hex(4)  # a restarted coordinator starts a new timeline: the page starts over
        self.seqs: list[int] = []
        self.rows: list[list[Any]] = []
        self.latest: Status | None = None
        self._snapshot: tuple[int, bytes] = (-1, b"null")

    def resume(self, metrics_csv: Path, capacity: int) -> None:
        """A resumed run's earlier rows, from the metrics CSV its ticks wrote (losses live elsewhere: they start
        again empty), so the page's curves go back to the run's start, not to the coordinator's."""
        if not metrics_csv.exists():
            return
        with open(metrics_csv, newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    ret = row["recent_return_mean"]
                    self._append([round(float(row["wall_seconds"]), 2), int(row["env_steps"]),
                                  float(row["env_steps_per_second"]), float(ret) if ret else None,
                                  float(row["samples_per_insert"]),
                                  round(int(row["buffer_transitions"]) / capacity, 4), int(row["policy_version"]), {}])
                except (KeyError, TypeError, ValueError):  # a line torn by a killed coordinator: skip it
                    continue

    def record(self, status: Status) -> None:
        """One row per housekeeping tick (the status is the tick's own, already built)."""
        capacity = sum(b.capacity_transitions for b in status.buffers)
        fill = sum(b.transitions for b in status.buffers) / capacity if capacity else 0.0
        self._append([round(status.wall_seconds, 2), status.env_steps, round(status.env_steps_per_second, 1),
                      status.recent_return_mean, round(status.learner.samples_per_insert, 4), round(fill, 4),
                      status.policy_version, status.learner.losses])
        self.latest = status

    def _append(self, row: list[Any]) -> None:
        seq = (self.seqs[-1] + 1) if self.seqs else 1
        self.seqs.append(seq)
        self.rows.append([seq, *row])
        if len(self.rows) > self.limit:
            half = self.limit // 2
            self.seqs = self.seqs[:half:2] + self.seqs[half:]
            self.rows = self.rows[:half:2] + self.rows[half:]

    def update(self, since: int, boot: str | None, evaluations: list[EvaluationResult], evaluations_since: int,
               tests: list[HoldoutResult], tests_since: int, threshold: float | None) -> bytes:
        """The reply to one poll, as JSON bytes. A poll from another boot of the coordinator gets everything."""
        if boot != self.boot:
            since = evaluations_since = tests_since = 0
        start = bisect.bisect_right(self.seqs, since)
        rows = self.rows[start:start + PER_POLL]
        evals = [[round(e.wall_seconds, 2), e.env_steps, e.policy_version, e.mean, e.std]
                 for e in evaluations[evaluations_since:evaluations_since + PER_POLL]]
        held = [[round(t.wall_seconds, 2), t.env_steps, t.policy_version, t.mean, t.std]
                for t in tests[tests_since:tests_since + PER_POLL]]
        head = {"boot": self.boot, "seq": rows[-1][0] if rows else since, "more": start + PER_POLL < len(self.rows),
                "columns": COLUMNS, "rows": rows, "evaluation_columns": EVALUATION_COLUMNS,
                "evaluations": evals, "evaluations_next": evaluations_since + len(evals), "tests": held,
                "tests_next": tests_since + len(held), "solve_threshold": threshold}
        body = json.dumps(head, separators=(",", ":"), allow_nan=False)
        return body[:-1].encode() + b',"snapshot":' + self.snapshot() + b"}"

    def snapshot(self) -> bytes:
        """The latest status without its per-seed and per-task detail, workers as rows: cached per tick."""
        status = self.latest
        if status is None:
            return b"null"
        seq = self.seqs[-1]
        if self._snapshot[0] != seq:
            doc = status.model_dump(mode="json", include={
                "run_name", "run_state", "run_message", "coordinator_resumes", "wall_seconds", "env_steps",
                "env_steps_per_second", "episodes", "chunks", "env_errors", "corrupt_chunks", "recent_return_mean",
                "policy_version", "policy_lag", "learner", "best_evaluation", "latest_test", "confirmed_by",
                "solve_rule", "tests_rejected", "buffers", "self_play"})
            doc["worker_columns"] = WORKER_COLUMNS
            doc["workers"] = [[getattr(w, c, None) for c in WORKER_COLUMNS] for w in status.workers]
            self._snapshot = (seq, json.dumps(doc, separators=(",", ":")).encode())
        return self._snapshot[1]
