"""Group commit: many mutations per SQLite transaction, each reply released only after its own commit.

Handlers apply a mutation in memory and `submit` its statements; they join the open group and get that
group's future. One writer thread commits a whole group per transaction (one fsync for hundreds of chunk
reports) and resolves the future. Meta keys are coalesced per group: only the last value of each key is
written, since later submissions carry the newer state.

If a commit fails (disk full, I/O error), that group and every group behind it fail: memory already holds
their effects, so the owner must reload its state from what *was* committed (`failure` tells it; `clear`
re-opens the journal once it has). Until then every submission fails at once, so nothing built on the lost
state can be acknowledged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)
Statement = tuple[str, tuple[Any, ...]]
_META_UPSERT = "INSERT INTO meta (key, value) VALUES {rows} ON CONFLICT(key) DO UPDATE SET value=excluded.value"
_INSERT = re.compile(r"(INSERT (?:OR REPLACE )?INTO [^(]+\([^)]*\) VALUES )(\([^)]*\))")
_MAX_PARAMS = 30_000  # below SQLite's default limit of 32,766 bound parameters per statement


class JournalFailed(RuntimeError):
    """A commit failed; the mutations of its group (and any after it) are not durable and must be undone."""


class _Group:
    def __init__(self) -> None:
        self.statements: list[Statement] = []
        self.meta: dict[str, Any] = {}
        self.after: list[Callable[[], None]] = []  # run once committed, before the future resolves
        self.future: Future[None] = Future()
        # Shared by every request in the group: one whose client went away must not cancel it for the rest.
        self.future.set_running_or_notify_cancel()


class GroupCommitter:
    def __init__(self, db: sqlite3.Connection, db_lock: threading.Lock, max_statements: int = 20_000) -> None:
        self._db = db
        self._db_lock = db_lock
        self._max_statements = max_statements
        self._cond = threading.Condition()
        self._open = _Group()
        self._committing: _Group | None = None
        self._failure: BaseException | None = None
        self._closed = False
        self.commits = 0
        self.submissions = 0
        self._thread = threading.Thread(target=self._loop, name="journal-writer", daemon=True)
        self._thread.start()

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def submit(self, statements: list[Statement], meta: dict[str, Any] | None = None,
               after: Callable[[], None] | None = None) -> Future[None]:
        """Queue statements (and meta values) for the next commit; the future resolves once they are durable.

        `after` (e.g. queueing the deletion of files the mutation freed) runs only if the commit succeeds, on
        the writer thread, before the future resolves: whoever waited for the commit sees its effects."""
        with self._cond:
            if self._failure is not None or self._closed:
                failed: Future[None] = Future()
                failed.set_exception(JournalFailed(f"journal unavailable: {self._failure or 'closed'}"))
                return failed
            group = self._open
            idle = not (group.statements or group.meta)  # else the writer was woken for this group already
            group.statements.extend(statements)
            if meta:
                group.meta.update(meta)
            if after is not None:
                group.after.append(after)
            self.submissions += 1
            if idle:
                self._cond.notify()
            return group.future

    def barrier(self) -> Future[None]:
        """A future that resolves once everything submitted so far is durable (or fails if any of it failed)."""
        with self._cond:
            if self._failure is not None:
                failed: Future[None] = Future()
                failed.set_exception(JournalFailed(f"journal unavailable: {self._failure}"))
                return failed
            if self._open.statements or self._open.meta:
                return self._open.future
            if self._committing is not None:
                return self._committing.future
            done: Future[None] = Future()
            done.set_result(None)
            return done

    def drain(self) -> None:
        """Block until everything submitted so far is committed or failed."""
        future = self.barrier()
        with contextlib.suppress(JournalFailed):
            future.result()

    def clear(self) -> None:
        """Re-open after a failure, once the owner has reloaded its state from the journal."""
        with self._cond:
            self._failure = None

    def close(self) -> None:
        self.drain()
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._open.statements or self._open.meta) and not self._closed:
                    self._cond.wait()
                if self._closed and not (self._open.statements or self._open.meta):
                    return
                group, self._open = self._open, _Group()
                self._committing = group
            error = self._commit(group)
            with self._cond:
                self._committing = None
                if error is not None:
                    self._failure = error
                    # Everything queued behind the failed group was applied on top of it: it fails too.
                    behind, self._open = self._open, _Group()
                    _fail(behind.future, error)
            if error is None:
                self.commits += 1
                for action in group.after:
                    try:
                        action()
                    except Exception:  # a follow-up must not turn a durable commit into a reported failure
                        log.exception("action after a journal commit failed")
                group.future.set_result(None)
            else:
                log.error("journal commit failed (%s): %d statements not durable", error, len(group.statements))
                _fail(group.future, error)

    def _commit(self, group: _Group) -> BaseException | None:
        statements = merged(group.statements)
        if group.meta:
            rows = ", ".join(["(?, ?)"] * len(group.meta))
            statements.append((_META_UPSERT.format(rows=rows),
                               tuple(x for k, v in group.meta.items() for x in (k, json.dumps(v)))))
        try:
            with self._db_lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    for sql, args in statements:
                        self._db.execute(sql, args)
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
        except Exception as exc:  # any failure to commit is reported to every waiter, never swallowed
            return exc
        return None


def merged(statements: list[Statement]) -> list[Statement]:
    """The same effects in fewer statements: each run of consecutive single-row INSERTs of one form (same SQL)
    becomes multi-row INSERTs, in order. Anything else is kept as it is."""
    out: list[Statement] = []
    i = 0
    while i < len(statements):
        sql, args = statements[i]
        match = _INSERT.fullmatch(sql)
        j = i + 1
        if match is not None and args:
            limit = max(1, _MAX_PARAMS // len(args))
            while j < len(statements) and j - i < limit and statements[j][0] == sql:
                j += 1
        if j - i == 1:
            out.append((sql, args))
        else:
            head, row = match.groups()  # type: ignore[union-attr]  # j > i + 1 only where it matched
            out.append((head + ", ".join([row] * (j - i)), tuple(x for _, a in statements[i:j] for x in a)))
        i = j
    return out


def _fail(future: Future[None], error: BaseException) -> None:
    if not future.done():
        future.set_exception(JournalFailed(f"journal commit failed: {error}"))
