"""Garbage collection of payload files no one acknowledged (a collector killed between write and report), and
recorded datasets that neither it nor replay eviction ever reaches."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from rlfleet.coordinator.run import Run
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.factory import StoreTarget, open_datasets, open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.s3 import S3Store
from tests.support.configs import layout
from tests.support.datasets import write_demo_dataset
from tests.support.run import chunk, collector


def _age(store: LocalStore, relpath: str, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(store.resolve(relpath), (old, old))


def test_only_old_unreferenced_files_are_deleted(run: Run, store: LocalStore) -> None:
    worker, task = collector(run)
    run.chunks.ingest(chunk(run, worker, task, "acked"))
    _age(store, f"chunks/{task}/acked.msgpack", 3600)  # old but referenced: kept
    store.put(f"chunks/{task}/orphan-old.msgpack", b"never reported")
    _age(store, f"chunks/{task}/orphan-old.msgpack", 3600)
    store.put(f"chunks/{task}/orphan-new.msgpack", b"report may still be in flight")
    torn = store.root / "chunks" / task / ".tmp-deadbeef"  # not addressable by clients, found by the sweep
    torn.write_bytes(b"half a payload")
    os.utime(torn, (time.time() - 3600,) * 2)

    assert run.ctx.payloads.collect_garbage(run.housekeeping.referenced_payloads(), grace_seconds=300) == 2
    left = {p.relative_to(store.root).as_posix() for p in (store.root / "chunks").rglob("*") if p.is_file()}
    assert left == {f"chunks/{task}/acked.msgpack", f"chunks/{task}/orphan-new.msgpack"}


def test_gc_on_an_empty_store_does_nothing(run: Run) -> None:
    assert run.ctx.payloads.collect_garbage(run.housekeeping.referenced_payloads(), grace_seconds=0) == 0


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_eviction_and_the_orphan_sweep_never_reach_a_recorded_dataset(
        make_run: Callable[..., Run], store: LocalStore, data_dir: Path, run_config: RunConfig) -> None:
    """A dataset in the run's data directory, then a run that evicts and sweeps everything it may: the
    recording is left byte for byte, while the run's own files did go."""
    write_demo_dataset(open_datasets(data_dir, None))  # type: ignore[arg-type]
    recording = _files(data_dir / "datasets")
    assert len(recording) == 6  # 5 episodes and the manifest
    run = make_run(layout(run_config, chunk_steps=128))  # chunks of 256 rows into a buffer of 2000
    worker, task = collector(run)
    for i in range(12):
        run.chunks.ingest(chunk(run, worker, task, f"c{i:02d}"))
    store.put(f"chunks/{task}/orphan.msgpack", b"never reported")
    _age(store, f"chunks/{task}/orphan.msgpack", 3600)
    referenced = run.housekeeping.referenced_payloads()
    assert run.ctx.payloads.collect_garbage(referenced, grace_seconds=0) >= 1  # an evicted chunk's
    run.ctx.payloads.flush()  # file may still be queued for the deleter when the sweep finds it: counted there
    assert not store.resolve(f"chunks/{task}/orphan.msgpack").exists()
    assert run.ctx.data.status().evicted_chunks > 0
    assert not store.resolve(f"chunks/{task}/c00.msgpack").exists()  # evicted, and its file deleted
    assert _files(data_dir / "datasets") == recording


def test_in_an_object_store_the_datasets_prefix_is_outside_every_runs_prefix(data_dir: Path) -> None:
    """The sweep lists the run store's prefix only: the datasets prefix must not lie under any of a run's
    prefixes (nor they under it), whatever the bucket prefix, even for a run named `datasets`."""
    for prefix in ("", "team-a"):
        target = StoreTarget("bucket", prefix, "http://127.0.0.1:9", 1.0)  # no request is made
        datasets = open_datasets(data_dir, target)
        assert isinstance(datasets, S3Store)
        for area in ("store", "checkpoints", "best"):
            run_store = open_store(RunLayout(data_dir, "datasets", store=target), area)
            assert isinstance(run_store, S3Store)
            run_prefix, dataset_prefix = run_store.prefix + "/", datasets.prefix + "/"
            assert not run_prefix.startswith(dataset_prefix) and not dataset_prefix.startswith(run_prefix)
