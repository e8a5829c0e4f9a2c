"""Garbage collection of payload files no one acknowledged (a collector killed between write and report)."""

from __future__ import annotations

import os
import time

from coordinator.run import Run
from shared.store import LocalStore
from tests.coordinator.test_run import chunk, collector


def _age(store: LocalStore, relpath: str, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(store.resolve(relpath), (old, old))


def test_only_old_unreferenced_files_are_deleted(run: Run, store: LocalStore) -> None:
    worker, task = collector(run)
    run.ingest(chunk(run, worker, task, "acked"))
    _age(store, f"chunks/{task}/acked.msgpack", 3600)  # old but referenced: kept
    store.put(f"chunks/{task}/orphan-old.msgpack", b"never reported")
    _age(store, f"chunks/{task}/orphan-old.msgpack", 3600)
    store.put(f"chunks/{task}/orphan-new.msgpack", b"report may still be in flight")
    torn = store.root / "chunks" / task / ".tmp-deadbeef"  # not addressable by clients, found by the sweep
    torn.write_bytes(b"half a payload")
    os.utime(torn, (time.time() - 3600,) * 2)

    assert run.payloads.collect_garbage(run.referenced_payloads(), grace_seconds=300) == 2
    left = {p.relative_to(store.root).as_posix() for p in (store.root / "chunks").rglob("*") if p.is_file()}
    assert left == {f"chunks/{task}/acked.msgpack", f"chunks/{task}/orphan-new.msgpack"}


def test_gc_on_an_empty_store_does_nothing(run: Run) -> None:
    assert run.payloads.collect_garbage(run.referenced_payloads(), grace_seconds=0) == 0
