"""Payload lifetime: the coordinator decides when a payload file may go, and a thread of its own deletes it.

Files of chunks that left the buffer go once that is committed; files of chunks consumed by a draw
(`max_use`) go after a grace period, since the learner reads them just after sampling, and that grace starts
only once the draw is durable: a draw whose commit failed is undone (its chunks are back in the buffer, and the
learner's retry may draw them again), so its files must stay. Files nobody references (a collector killed
between writing and reporting) go after `orphan_grace`. Deleting never runs on a request's path: store I/O (a
local disk, or an object store's round trips) happens here alone.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable

from rlfleet.shared.storage.protocol import PayloadStore

log = logging.getLogger(__name__)
CONSUMED_GRACE_SECONDS = 30.0  # a learner reads what it sampled within this; then max_use'd files are deleted


class PayloadLifetime:
    def __init__(self, store: PayloadStore) -> None:
        self.store = store
        self.deleted = 0
        # Consumed files: those of durable draws, counting down (the event loop expires them, while the journal's
        # writer thread adds to them), and those of draws not yet durable, kept whatever happens.
        self._lock = threading.Lock()
        self._consumed: deque[tuple[float, str]] = deque()
        self._drawn: set[str] = set()  # used up by a draw not yet durable (a used-up chunk is drawn no more)
        self._doomed: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="payload-deleter", daemon=True)
        self._thread.start()

    def delete(self, paths: list[str]) -> None:
        """Queue files for deletion (thread-safe: called once their removal from the buffer is durable)."""
        for path in paths:
            self._doomed.put(path)

    def consumed(self, now: float, paths: list[str]) -> Callable[[], None]:
        """Files a draw used up (at `now`): kept from here on. The action returned starts their grace; it is to
        run once the draw is durable (thread-safe: the journal's writer runs it). A draw never made durable
        leaves them kept until `undone`."""
        with self._lock:
            self._drawn.update(paths)

        def durable() -> None:
            with self._lock:
                self._drawn.difference_update(paths)
                self._consumed.extend((now, path) for path in paths)

        return durable

    def undone(self) -> None:
        """Every draw not yet durable failed (the run reloaded its state from the journal): their chunks are back
        in the buffer, which keeps their files now."""
        with self._lock:
            self._drawn.clear()

    def expire_consumed(self, now: float) -> None:
        with self._lock:
            while self._consumed and now - self._consumed[0][0] >= CONSUMED_GRACE_SECONDS:
                self._doomed.put(self._consumed.popleft()[1])

    def in_grace(self) -> set[str]:
        """Consumed files the learner may still be reading, or that a draw not yet durable used up."""
        with self._lock:
            return {path for _, path in self._consumed} | self._drawn

    def collect_garbage(self, referenced: set[str], grace_seconds: float) -> int:
        """(blocking: run in a thread) Delete payload files nothing references, once older than the grace."""
        deleted = self.store.delete_unreferenced("chunks", referenced, time.time() - grace_seconds)
        if deleted:
            log.info("garbage-collected %d unacknowledged payload files", deleted)
        return deleted

    def flush(self) -> None:
        """Block until every queued deletion is done (clean shutdown, and tests that look at the store)."""
        self._doomed.join()

    def close(self) -> None:
        self._doomed.put(None)
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        """Delete in batches: whatever queued up while the last batch ran, each directory opened once."""
        while (first := self._doomed.get()) is not None:
            batch, done = [first], False
            while not done and len(batch) < 1024:
                try:
                    path = self._doomed.get_nowait()
                except queue.Empty:
                    break
                if path is None:
                    done = True
                    self._doomed.task_done()
                else:
                    batch.append(path)
            try:
                self.deleted += self.store.delete_many(batch)
            except Exception:  # a failed delete leaves orphans for the GC sweep; the thread must go on
                log.exception("could not delete %d payloads", len(batch))
            finally:
                for _ in batch:
                    self._doomed.task_done()
            if done:
                return
        self._doomed.task_done()
