"""A restarted coordinator rebuilds its replay buffer exactly: ring, priorities, uses, removals, lag stats,
from the chunk table and the replay log, with or without a compacted snapshot in between."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rlfleet.coordinator.state.dataplane as dataplane
from rlfleet.coordinator.errors import NotEnoughData
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.state.dataplane import DataPlane
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import PriorityUpdate, SampleRequest
from tests.support.configs import layout, make_config, queue_config
from tests.support.replay import tree_of
from tests.support.run import FakeClock, chunk, collector, learner, publish, served_chunk_ids


def _open(path: Path, config: RunConfig, store: LocalStore, clock: FakeClock) -> Run:
    return Run(config, store, clock=clock, sample_wait_seconds=0, journal=Journal(path))


def _restart(run: Run, path: Path, store: LocalStore, clock: FakeClock) -> Run:
    run.ctx.journal.close()  # the process dies here
    clock.advance(2.0)
    return _open(path, run.ctx.config, store, clock)


def _prioritized(base: RunConfig, **replay: Any) -> RunConfig:
    """Chunks of 2 envs x at most 20 steps (cut after 4 episodes: 20, 30 and 40 rows all occur)."""
    values: dict[str, Any] = {"sampler": "prioritized", "capacity_transitions": 120, "min_transitions": 1,
                              "samples_per_insert": 1000.0, "tolerance_transitions": 1_000_000, "alpha": 0.6,
                              "beta_horizon": 5000, "max_use": 3, "max_staleness": 2}
    values.update(replay)
    return layout(make_config(base, replay=values), num_envs=2, chunk_steps=20, n_episode=4)


def buffer_state(run: Run) -> dict[str, Any]:
    """Everything about the buffer that sampling and priority updates depend on (chunk keys excluded: they
    are renumbered on restore)."""
    b = run.ctx.data.buffer
    storage, tree = b.storage, tree_of(b)
    assert tree is not None
    live = np.flatnonzero(storage.length > 0)
    slot_chunk = [storage.chunks[int(k)].entry.chunk_id if k >= 0 else None for k in storage.chunk_key]
    return {
        "entries": b.entries(),
        "head": b.head,
        "row_ids": storage.ids.tolist(),
        "slot_chunk": slot_chunk,
        "item_lengths": storage.length.tolist(),
        "leaves": tree.get(np.arange(b.capacity)).tolist(),
        "tree_total": tree.total,
        "tree_min": tree.min,
        "live_uses": b.max_use.uses[live].tolist(),
        "max_priority": b.max_priority,
        "counts": (len(b), b.transitions, b.items, b.item_steps),
        "removed": (b.overwrite.evicted, b.max_use.removed, b.staleness.removed, storage.unservable),
        "lag": run.ctx.data.lag.state(),
        "limiter": (run.ctx.data.limiter.inserted, run.ctx.data.limiter.sampled),
        "status_buffers": run.status().buffers,
        "policy_lag": run.status().policy_lag,
    }


def assert_same_buffer(after: Run, before: dict[str, Any]) -> None:
    state = buffer_state(after)
    for key, value in before.items():
        assert state[key] == value, key


def _update(run: Run, lrn: str, ids: list[int], priorities: list[float]) -> int:
    return run.learning.update_priorities(PriorityUpdate(worker_id=lrn, ids=ids, priorities=priorities)).ignored


def _sample_ids(run: Run, lrn: str, n: int) -> list[int]:
    return run.learning.sample(SampleRequest(worker_id=lrn, batch_size=n)).ids


def _busy_prioritized(run: Run, store: LocalStore, rng: np.random.Generator, *,
                      tick: bool = False) -> tuple[str, str, str]:
    """Ingest, sample, reprioritize, overwrite at capacity, drop stale chunks and use items up (max_use 3)."""
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0", env_steps=40, policy_version=0))
    run.chunks.ingest(chunk(run, w, t, "c1", env_steps=40, policy_version=0))
    ids = _sample_ids(run, lrn, 30)
    _update(run, lrn, ids, rng.uniform(0, 5, len(ids)).tolist())
    publish(run, store, lrn, 1)
    run.chunks.ingest(chunk(run, w, t, "c2", env_steps=40, policy_version=1))  # the ring is full: 120
    if tick:
        run.tick()
    for _ in range(4):
        ids = _sample_ids(run, lrn, 50)
        _update(run, lrn, ids, rng.uniform(0, 20, len(ids)).tolist())
    publish(run, store, lrn, 2)
    run.chunks.ingest(chunk(run, w, t, "c3", env_steps=40, policy_version=2))  # overwrites c0's rows: evicted
    if tick:
        run.tick()
    publish(run, store, lrn, 3)  # c1 (v0) lags by 3 > 2: stale
    run.chunks.ingest(chunk(run, w, t, "c4", env_steps=30, policy_version=2))  # lag 1
    _update(run, lrn, [0, 5, 90, 125], [50.0, 60.0, 3.0, 4.0])  # 0 and 5 were overwritten long ago
    run.chunks.ingest(chunk(run, w, t, "c5", env_steps=20, policy_version=3))  # overwrites c2's rows 80..89
    ids = _sample_ids(run, lrn, 40)
    _update(run, lrn, ids[:10], rng.uniform(0, 2, 10).tolist())
    b = run.ctx.data.buffer
    assert b.storage.by_id["c2"].live_rows == 30  # partly overwritten, still in the buffer
    assert (b.overwrite.evicted, b.staleness.removed) == (1, 1)
    assert b.max_use.removed > 0  # some items were used up
    assert b.max_priority > 1.0
    return w, t, lrn


def test_restart_restores_a_prioritized_buffer_exactly(tmp_path: Path, run_config: RunConfig,
                                                       store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _open(db, _prioritized(run_config), store, clock)
    _busy_prioritized(run, store, np.random.default_rng(1))
    before = buffer_state(run)
    assert before["lag"]["sampled"][0] > 0 and before["lag"]["ingest"] == {"0": 5, "1": 1}

    after = _restart(run, db, store, clock)
    assert after.ctx.data.replay_records > 5  # restored by replaying the log, not a snapshot
    assert_same_buffer(after, before)
    assert after.status().coordinator_resumes == 1


def test_restart_after_snapshot_compaction_and_further_updates(tmp_path: Path, run_config: RunConfig,
                                                               store: LocalStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataplane, "SNAPSHOT_EVERY", 2)
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _open(db, _prioritized(run_config), store, clock)
    rng = np.random.default_rng(2)
    w, t, lrn = _busy_prioritized(run, store, rng, tick=True)
    run.tick()  # compacts the log into a single snapshot record
    loaded = run.ctx.journal.load(["data"], DataPlane.tables)
    assert loaded is not None
    log = loaded[1]["data"].rows["replay_log"]  # (kind, ids, values, uses, head)
    assert [r[0] for r in log] == ["snapshot"]
    assert log[0][4] == run.ctx.data.buffer.head
    at_snapshot = buffer_state(run)

    # right after a snapshot
    run = _restart(run, db, store, clock)
    assert_same_buffer(run, at_snapshot)

    # and after further draws, updates (some on ids the snapshot knows) and ingests on top of it
    for i in range(3):
        ids = _sample_ids(run, lrn, 40)
        _update(run, lrn, ids, rng.uniform(0, 30, len(ids)).tolist())
        run.chunks.ingest(chunk(run, w, t, f"d{i}", env_steps=20, policy_version=3))
    assert run.ctx.data.replay_records > 2
    before = buffer_state(run)
    run = _restart(run, db, store, clock)
    assert_same_buffer(run, before)

    # a second compaction with items used up both before and after the first one
    for _ in range(3):
        _update(run, lrn, _sample_ids(run, lrn, 40), [1.0] * 40)
    run.tick()
    assert run.ctx.data.replay_records == 1
    _update(run, lrn, _sample_ids(run, lrn, 10), [7.0] * 10)
    before = buffer_state(run)
    assert before["removed"][1] > at_snapshot["removed"][1]
    run = _restart(run, db, store, clock)
    assert_same_buffer(run, before)


def test_max_use_removals_survive_a_restart(tmp_path: Path, run_config: RunConfig, store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    config = layout(_prioritized(run_config, max_use=2, max_staleness=None), num_envs=1, chunk_steps=1)
    run = _open(db, config, store, clock)
    w, t = collector(run)
    lrn = learner(run)
    reports = [chunk(run, w, t, f"c{i}") for i in range(12)]  # one item per chunk: ids 0..11
    for report in reports:
        run.chunks.ingest(report)
    used = Counter(_sample_ids(run, lrn, 10))
    used.update(_sample_ids(run, lrn, 6))
    assert max(used.values()) == 2 and sum(used.values()) == 16
    exhausted = {i for i, n in used.items() if n == 2}
    assert {e.chunk_id for e in run.ctx.data.buffer.entries()} == {f"c{i}" for i in set(range(12)) - exhausted}

    run = _restart(run, db, store, clock)
    assert {e.chunk_id for e in run.ctx.data.buffer.entries()} == {f"c{i}" for i in set(range(12)) - exhausted}
    assert run.status().buffers[0].removed_max_use == len(exhausted)
    after: Counter[int] = Counter()
    for _ in range(30):
        try:
            after.update(_sample_ids(run, lrn, 12))
        except NotEnoughData:
            break
    else:
        pytest.fail("the buffer never ran dry")
    assert not exhausted & set(after)  # used up before the restart: never served after it
    assert {i: used[i] + after[i] for i in range(12)} == dict.fromkeys(range(12), 2)  # each served exactly twice
    assert run.status().buffers[0].removed_max_use == 12 and len(run.ctx.data.buffer) == 0


def test_queue_consumed_chunks_are_not_served_after_a_restart(tmp_path: Path, run_config: RunConfig,
                                                              store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _open(db, queue_config(run_config), store, clock)
    w, t = collector(run)
    lrn = learner(run)
    for i in range(5):
        run.chunks.ingest(chunk(run, w, t, f"c{i}", env_steps=32))
    assert served_chunk_ids(run.learning.sample(SampleRequest(worker_id=lrn, batch_size=8))) == ["c0", "c1"]

    run = _restart(run, db, store, clock)
    assert [e.chunk_id for e in run.ctx.data.buffer.entries()] == ["c2", "c3", "c4"]
    buf = run.status().buffers[0]
    assert (buf.chunks, buf.items, buf.removed_max_use, buf.sampled_transitions) == (3, 3, 2, 64)
    assert served_chunk_ids(run.learning.sample(SampleRequest(worker_id=lrn, batch_size=8))) == ["c2", "c3"]
    run = _restart(run, db, store, clock)
    assert served_chunk_ids(run.learning.sample(SampleRequest(worker_id=lrn, batch_size=8))) == ["c4"]
    run = _restart(run, db, store, clock)
    with pytest.raises(NotEnoughData):
        run.learning.sample(SampleRequest(worker_id=lrn, batch_size=8))
    assert len(run.ctx.data.buffer) == 0
