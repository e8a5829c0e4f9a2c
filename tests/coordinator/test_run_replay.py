"""The Run's replay features in-process: priorities, batch bounds, on-policy queues, chunk layout checks,
policy-lag statistics and the heartbeat long poll."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rlfleet.coordinator.errors import Conflict, Invalid, NotEnoughData
from rlfleet.coordinator.operations.context import PAUSE_SECONDS
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.state.payloads import CONSUMED_GRACE_SECONDS
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import HeartbeatResponse, PriorityUpdate, SampleRequest, SampleResponse
from tests.support.configs import layout, make_config, queue_config
from tests.support.journal import fill_journal, free_journal
from tests.support.replay import tree_of
from tests.support.run import (
    FakeClock,
    chunk,
    collector,
    counters,
    learner,
    publish,
    register,
    rows,
    served_chunk_ids,
    settle_files,
)

EPS = 1e-6  # ReplayConfig.priority_epsilon default


def prioritized(base: RunConfig, **replay: Any) -> RunConfig:
    """Prioritized replay over transitions, without rate limiting getting in the way of many samples."""
    values: dict[str, Any] = {"sampler": "prioritized", "min_transitions": 1, "samples_per_insert": 1000.0,
                              "tolerance_transitions": 1_000_000, "beta_start": 0.4, "beta_horizon": 1000}
    values.update(replay)
    return make_config(base, replay=values)


def sample(run: Run, worker_id: str, batch_size: int, num_batches: int = 1) -> SampleResponse:
    return run.learning.sample(SampleRequest(worker_id=worker_id, batch_size=batch_size, num_batches=num_batches))


def update(run: Run, worker_id: str, ids: list[int], priorities: list[float]) -> Any:
    return run.learning.update_priorities(PriorityUpdate(worker_id=worker_id, ids=ids, priorities=priorities))


# ----- prioritized replay -----------------------------------------------------------------------------------


def test_prioritized_sample_returns_ids_and_importance_weights(make_run: Callable[..., Run], run_config: RunConfig,
                                                               store: LocalStore) -> None:
    run = make_run(layout(prioritized(run_config, alpha=1.0), chunk_steps=25))  # chunks of 2 x 25 = 50 rows
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))  # ids 0..49, all at max priority 1
    fresh = sample(run, lrn, 40)
    assert fresh.unit == "transition"
    assert len(fresh.ids) == len(fresh.weights) == len(fresh.offsets) == len(fresh.lengths) == 40
    assert fresh.lengths == [1] * 40
    assert all(0 <= i < 50 for i in fresh.ids)
    assert fresh.ids == fresh.offsets  # one chunk starting at row id 0: id == offset
    assert fresh.weights == [1.0] * 40  # equal priorities: every weight is 1

    # ids 0..9 at priority 1 (the minimum), ids 10..49 at priority 4
    update(run, lrn, list(range(50)), [1.0] * 10 + [4.0] * 40)
    beta = run.status().buffers[0].beta
    assert beta == pytest.approx(0.4 + 0.6 * 40 / 1000)
    resp = sample(run, lrn, 200)
    weights = np.asarray(resp.weights)
    ids = np.asarray(resp.ids)
    assert len(weights) == len(ids) == 200
    assert np.all((weights > 0) & (weights <= 1.0))
    assert weights.max() == pytest.approx(1.0)
    low = ids < 10
    assert low.any() and (~low).any()
    assert weights[low] == pytest.approx(np.ones(int(low.sum())))
    expected_high = ((4.0 + EPS) / (1.0 + EPS)) ** -beta
    assert weights[~low] == pytest.approx(np.full(int((~low).sum()), expected_high))
    assert expected_high < 0.6


def test_raised_priority_is_drawn_much_more_often(make_run: Callable[..., Run], run_config: RunConfig,
                                                  store: LocalStore) -> None:
    run = make_run(layout(prioritized(run_config, alpha=1.0), chunk_steps=50))  # chunks of 100 rows
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))
    before = Counter(sample(run, lrn, 2000).ids)
    assert before[7] < 60  # uniform: 20 expected
    ack = update(run, lrn, [7], [99.0])
    assert (ack.updated, ack.ignored) == (1, 0)
    after = Counter(sample(run, lrn, 2000).ids)
    # P(7) = 99 / (99 + 99 * 1) = 0.5: about 1000 of 2000; every other id about 10
    assert 850 < after[7] < 1150
    assert max(n for i, n in after.items() if i != 7) < 40


def test_update_of_an_overwritten_id_is_ignored_and_spares_the_new_occupant(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = make_run(layout(prioritized(run_config, capacity_transitions=100, alpha=0.5), chunk_steps=25))
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "a0"))  # chunks of 50 rows: ids 0..49
    run.chunks.ingest(chunk(run, w, t, "a1"))  # ids 50..99: the ring is full
    drawn = sample(run, lrn, 64).ids
    assert drawn and max(drawn) < 100
    update(run, lrn, [60], [16.0])  # raises max_priority: later chunks enter at 16 + eps
    run.chunks.ingest(chunk(run, w, t, "b"))  # ids 100..149 overwrite slots 0..49
    assert [e.chunk_id for e in run.ctx.data.buffer.entries()] == ["a1", "b"]
    new_leaf = (16.0 + EPS) ** 0.5
    tree = tree_of(run.ctx.data.buffer)
    assert tree is not None
    assert tree.get(np.array([3]))[0] == pytest.approx(new_leaf)
    ack = update(run, lrn, [3, 70], [1000.0, 9.0])  # id 3 now lives in slot 3 as id 103
    assert (ack.updated, ack.ignored) == (1, 1)
    assert tree.get(np.array([3]))[0] == pytest.approx(new_leaf)  # id 103 untouched
    assert tree.get(np.array([70]))[0] == pytest.approx((9.0 + EPS) ** 0.5)
    assert run.status().buffers[0].max_priority == pytest.approx(16.0 + EPS)  # the ignored 1000 did not count


def test_priority_update_rejects_unissued_ids_and_mismatched_lengths(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = make_run(layout(prioritized(run_config), chunk_steps=10))  # chunks of 20 rows
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))  # ids 0..19; the head is 20
    leaves = tree_of(run.ctx.data.buffer).get(np.arange(20)).copy()  # type: ignore[union-attr]
    with pytest.raises(Invalid, match="never issued") as err:
        update(run, lrn, [5, 20], [2.0, 2.0])
    assert err.value.status == 422
    assert "next id is 20" in err.value.message
    with pytest.raises(Invalid, match="never issued"):
        update(run, lrn, [10**9], [1.0])
    with pytest.raises(Invalid, match="2 ids but 1 priorities") as err:
        update(run, lrn, [1, 2], [3.0])
    assert err.value.status == 422
    with pytest.raises(Invalid, match="1 ids but 3 priorities"):
        update(run, lrn, [1], [3.0, 3.0, 3.0])
    assert np.array_equal(tree_of(run.ctx.data.buffer).get(np.arange(20)), leaves)  # type: ignore[union-attr]
    assert run.ctx.data.buffer.max_priority == 1.0
    assert update(run, lrn, [19], [2.0]).updated == 1  # the boundary id is valid


def test_priorities_on_a_uniform_buffer_conflict(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))
    with pytest.raises(Conflict, match="uniform sampler") as err:
        update(run, lrn, [1], [5.0])
    assert err.value.status == 409
    assert run.ctx.data.buffer.max_priority == 1.0


def test_new_items_enter_at_the_current_max_priority(make_run: Callable[..., Run], run_config: RunConfig,
                                                     store: LocalStore) -> None:
    run = make_run(layout(prioritized(run_config, alpha=0.6), chunk_steps=5))  # chunks of 10 rows
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))
    tree = tree_of(run.ctx.data.buffer)
    assert tree is not None
    assert np.array_equal(tree.get(np.arange(10)), np.ones(10))  # max priority starts at 1
    update(run, lrn, [2, 4], [7.0, 3.0])
    assert run.status().buffers[0].max_priority == pytest.approx(7.0 + EPS)
    update(run, lrn, [4], [0.5])  # a lower priority does not lower the max
    assert run.status().buffers[0].max_priority == pytest.approx(7.0 + EPS)
    run.chunks.ingest(chunk(run, w, t, "c1"))  # ids 10..19
    assert tree.get(np.arange(10, 20)) == pytest.approx(np.full(10, (7.0 + EPS) ** 0.6))
    assert tree.get(np.array([4]))[0] == pytest.approx((0.5 + EPS) ** 0.6)
    # by sampling: the new items are as likely as the top item, ~ 7**0.6 / 0.5**0.6 ~ 4.9x an item at 0.5
    drawn = Counter(sample(run, lrn, 4000).ids)
    assert drawn[12] > 2.5 * drawn[4]
    assert 0.6 < drawn[12] / drawn[2] < 1.6


def test_beta_anneals_from_beta_start_to_one_with_sampled_transitions(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = make_run(layout(prioritized(run_config, beta_start=0.4, beta_horizon=1000), chunk_steps=50))
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))  # 100 rows
    assert run.status().buffers[0].beta == pytest.approx(0.4)
    sample(run, lrn, 250)
    assert run.status().buffers[0].beta == pytest.approx(0.4 + 0.6 * 0.25)
    sample(run, lrn, 250)
    assert run.status().buffers[0].beta == pytest.approx(0.7)
    # the next draw is weighted with beta 0.7: w = (leaf / min leaf) ** -beta, leaf = (p + eps) ** alpha
    update(run, lrn, list(range(100)), [1.0] * 50 + [8.0] * 50)
    resp = sample(run, lrn, 500)
    high = {wt for i, wt in zip(resp.ids, resp.weights, strict=True) if i >= 50}
    assert len(high) == 1
    assert high.pop() == pytest.approx(((8.0 + EPS) / (1.0 + EPS)) ** (-0.6 * 0.7))
    assert run.status().buffers[0].beta == pytest.approx(1.0)
    sample(run, lrn, 500)
    assert run.status().buffers[0].beta == 1.0  # capped
    uniform = make_run()
    assert uniform.status().buffers[0].beta == 1.0


# ----- batch bounds -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("batch_size", "num_batches"), [(8, 1), (1, 15), (257, 1), (64, 5)])
def test_transition_batches_outside_the_bounds_are_invalid(make_run: Callable[..., Run], run_config: RunConfig,
                                                           store: LocalStore, batch_size: int,
                                                           num_batches: int) -> None:
    run = make_run(layout(run_config, chunk_steps=250, sampling={"min_batch_size": 16, "max_batch_size": 256}))
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))  # 500 rows
    with pytest.raises(Invalid, match=r"outside the configured batch bounds \[16, 256\]") as err:
        sample(run, lrn, batch_size, num_batches)
    assert f"({batch_size * num_batches} transitions)" in err.value.message
    assert run.ctx.data.limiter.sampled == 0
    assert len(sample(run, lrn, 16).ids) == 16  # the bounds themselves are fine
    assert len(sample(run, lrn, 128, 2).ids) == 256
    assert run.ctx.data.limiter.sampled == 272


# ----- on-policy queues -------------------------------------------------------------------------------------


def test_fifo_queue_serves_chunks_in_order_each_at_most_once(make_run: Callable[..., Run], run_config: RunConfig,
                                                             store: LocalStore) -> None:
    run = make_run(queue_config(run_config))
    w, t = collector(run)
    lrn = learner(run)
    for i in range(5):
        run.chunks.ingest(chunk(run, w, t, f"c{i}"))
    first = sample(run, lrn, 8)  # at most max_batch_size=64 steps: two chunks of 32
    assert first.unit == "chunk"
    assert served_chunk_ids(first) == ["c0", "c1"]
    assert (first.offsets, first.lengths, first.ids) == ([0, 0], [32, 32], [0, 32])
    assert first.weights == [1.0, 1.0]
    assert served_chunk_ids(sample(run, lrn, 1)) == ["c2"]
    assert served_chunk_ids(sample(run, lrn, 8)) == ["c3", "c4"]
    with pytest.raises(NotEnoughData, match="fewer than sampling.min_batch_size=32"):
        sample(run, lrn, 8)
    buf = run.status().buffers[0]
    assert (buf.chunks, buf.items, buf.removed_max_use, buf.sampled_transitions) == (0, 0, 5, 160)


def test_lifo_queue_serves_the_newest_chunk_first(make_run: Callable[..., Run], run_config: RunConfig,
                                                  store: LocalStore) -> None:
    run = make_run(queue_config(run_config, sampler="lifo"))
    w, t = collector(run)
    lrn = learner(run)
    for i in range(4):
        run.chunks.ingest(chunk(run, w, t, f"c{i}"))
    assert served_chunk_ids(sample(run, lrn, 1)) == ["c3"]
    run.chunks.ingest(chunk(run, w, t, "c4"))
    assert served_chunk_ids(sample(run, lrn, 8)) == ["c4", "c2"]
    assert served_chunk_ids(sample(run, lrn, 8)) == ["c1", "c0"]
    with pytest.raises(NotEnoughData):
        sample(run, lrn, 1)


def test_queue_drops_chunks_that_lag_the_latest_policy(make_run: Callable[..., Run], run_config: RunConfig,
                                                       store: LocalStore) -> None:
    run = make_run(queue_config(run_config, force_sync=False, max_policy_lag=1))
    w, t = collector(run)
    lrn = learner(run)
    publish(run, store, lrn, 1)
    old = chunk(run, w, t, "old", policy_version=0)
    run.chunks.ingest(old)  # lag 1: still allowed
    run.chunks.ingest(chunk(run, w, t, "new", policy_version=1))
    assert run.status().buffers[0].chunks == 2
    publish(run, store, lrn, 2)  # "old" now lags by 2 > 1
    buf = run.status().buffers[0]
    assert (buf.chunks, buf.removed_stale, buf.transitions) == (1, 1, 32)
    settle_files(run)
    assert store.size(old.payload_path) is None  # its payload is deleted with it
    resp = sample(run, lrn, 8)
    assert served_chunk_ids(resp) == ["new"]
    assert resp.chunks[0].policy_version == 1
    with pytest.raises(NotEnoughData):
        sample(run, lrn, 8)
    # a chunk that already lags too far when it arrives is never served either
    run.chunks.ingest(chunk(run, w, t, "late", policy_version=0))
    assert run.status().buffers[0].removed_stale == 2
    with pytest.raises(NotEnoughData):
        sample(run, lrn, 8)


def test_force_sync_queue_drops_everything_older_than_the_latest_policy(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = make_run(queue_config(run_config))  # force_sync: lag 0
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "v0", policy_version=0))
    publish(run, store, lrn, 1)
    assert run.status().buffers[0].removed_stale == 1
    run.chunks.ingest(chunk(run, w, t, "v1", policy_version=1))
    assert served_chunk_ids(sample(run, lrn, 8)) == ["v1"]


def test_consumed_payloads_are_deleted_by_tick_after_the_grace_period(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore, clock: FakeClock) -> None:
    run = make_run(queue_config(run_config))
    w, t = collector(run)
    lrn = learner(run)
    reports = [chunk(run, w, t, f"c{i}") for i in range(3)]
    for report in reports:
        run.chunks.ingest(report)
    resp = sample(run, lrn, 8)
    assert served_chunk_ids(resp) == ["c0", "c1"]
    assert "c0" not in run.ctx.data.buffer and "c1" not in run.ctx.data.buffer
    settle_files(run)
    for report in reports:  # the learner has yet to read them
        assert store.get(report.payload_path, sha256=report.sha256)
    clock.advance(CONSUMED_GRACE_SECONDS - 1)
    run.workers.heartbeat(w)
    run.workers.heartbeat(lrn)
    run.tick()
    settle_files(run)
    assert all(store.size(r.payload_path) is not None for r in reports)
    clock.advance(1)
    run.tick()
    settle_files(run)
    assert store.size(reports[0].payload_path) is None
    assert store.size(reports[1].payload_path) is None
    assert store.size(reports[2].payload_path) is not None  # still queued
    assert "c2" in run.ctx.data.buffer


def test_payloads_of_a_draw_whose_commit_failed_are_kept_for_its_retry(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore, clock: FakeClock) -> None:
    run = make_run(queue_config(run_config))
    w, t = collector(run)
    lrn = learner(run)
    reports = [chunk(run, w, t, f"c{i}") for i in range(2)]
    for report in reports:
        run.chunks.ingest(report)
    request = SampleRequest(worker_id=lrn, request_id="r" * 32, batch_size=8)
    run.ctx.journal.committer.drain()  # the chunks are durable
    fill_journal(run.ctx.journal)
    run.learning.sample(request)  # its commit fails: the learner gets a 503 and retries
    run.ctx.journal.committer.drain()
    run.ctx.recover()
    free_journal(run.ctx.journal)
    assert [e.chunk_id for e in run.ctx.data.buffer.entries()] == ["c0", "c1"]  # the draw was undone
    clock.advance(CONSUMED_GRACE_SECONDS)
    for worker in (w, lrn):
        run.workers.heartbeat(worker)
    run.tick()
    settle_files(run)
    assert all(store.size(r.payload_path) is not None for r in reports)
    retried = run.learning.sample(request)  # the retry draws the same chunks, and can read them
    assert served_chunk_ids(retried) == ["c0", "c1"]
    for report in reports:
        assert store.get(report.payload_path, sha256=report.sha256)


def test_orphan_gc_spares_consumed_payloads_within_their_grace_period(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore, clock: FakeClock) -> None:
    run = make_run(queue_config(run_config))
    w, t = collector(run)
    lrn = learner(run)
    report = chunk(run, w, t, "c0")
    run.chunks.ingest(report)
    old = time.time() - 3600  # the chunk sat in the store for an hour before it was consumed
    os.utime(store.resolve(report.payload_path), (old, old))
    assert served_chunk_ids(sample(run, lrn, 1)) == ["c0"]
    # the learner is about to read it
    assert run.ctx.payloads.collect_garbage(run.housekeeping.referenced_payloads(), grace_seconds=300) == 0
    settle_files(run)
    assert store.size(report.payload_path) is not None
    clock.advance(CONSUMED_GRACE_SECONDS)
    run.tick()
    settle_files(run)
    assert store.size(report.payload_path) is None


def test_queue_backlog_pauses_collectors(make_run: Callable[..., Run], run_config: RunConfig,
                                         store: LocalStore) -> None:
    run = make_run(queue_config(run_config, replay={"tolerance_transitions": 64}))
    w, t = collector(run)
    lrn = learner(run)
    assert run.chunks.ingest(chunk(run, w, t, "c0")).directive.pause_seconds == 0.0
    ack = run.chunks.ingest(chunk(run, w, t, "c1"))  # 64 queued >= 64
    assert ack.directive.pause_seconds == PAUSE_SECONDS > 0
    assert run.workers.heartbeat(w).directive.pause_seconds == PAUSE_SECONDS
    assert run.workers.heartbeat(lrn).directive.pause_seconds == 0.0
    sample(run, lrn, 1)  # consumes c0: 32 queued
    assert run.workers.heartbeat(w).directive.pause_seconds == 0.0


def test_queue_sample_below_min_batch_size_is_not_enough_data(make_run: Callable[..., Run], run_config: RunConfig,
                                                              store: LocalStore) -> None:
    run = make_run(layout(queue_config(run_config), chunk_steps=8))  # chunks of 2 x 8 = 16 rows
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))
    with pytest.raises(NotEnoughData, match="holds 16 fresh transitions") as err:
        sample(run, lrn, 8)
    assert err.value.status == 409
    assert run.ctx.data.limiter.sampled == 0 and "c0" in run.ctx.data.buffer
    run.chunks.ingest(chunk(run, w, t, "c1"))
    assert served_chunk_ids(sample(run, lrn, 8)) == ["c0", "c1"]


def test_queue_sample_waits_for_max_batch_size_and_settles_for_min(run_config: RunConfig,
                                                                   store: LocalStore) -> None:
    config = queue_config(run_config, max_batch_size=128, max_wait_seconds=5)
    run = Run(config, store, clock=time.monotonic, sample_wait_seconds=0.4)
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))
    run.chunks.ingest(chunk(run, w, t, "c1"))
    request = SampleRequest(worker_id=lrn, batch_size=8)

    async def scenario() -> None:
        start = time.monotonic()
        # 64 < 128 queued: waits the full 0.4 s, then serves 64 >= 32
        resp = SampleResponse.model_validate_json(await run.learning.sample_waiting(request))
        elapsed = time.monotonic() - start
        assert 0.35 <= elapsed < 2.0
        assert served_chunk_ids(resp) == ["c0", "c1"]

        # a full batch arriving during the wait is served at once
        run.ctx.sample_wait_seconds = 3.0
        run.chunks.ingest(chunk(run, w, t, "c2"))
        t0 = time.monotonic()
        waiting = asyncio.create_task(run.learning.sample_waiting(request))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # 32 < 128: still waiting
        for i in range(3, 6):
            run.chunks.ingest(chunk(run, w, t, f"c{i}"))
        completed = time.monotonic()
        resp = SampleResponse.model_validate_json(await asyncio.wait_for(waiting, 5))
        done = time.monotonic()
        assert served_chunk_ids(resp) == ["c2", "c3", "c4", "c5"]
        assert done - completed < 1.0
        assert done - t0 < 2.0

    asyncio.run(scenario())


def test_a_queue_sample_waits_for_the_full_batch_from_when_its_least_arrived(run_config: RunConfig,
                                                                           store: LocalStore) -> None:
    """Timed from the request, this wait ended between two collectors' chunks of one round (the learner asks again
    as soon as a wait ends empty), and with force_sync the chunk left behind went stale."""
    config = queue_config(run_config, max_batch_size=128, max_wait_seconds=5)
    run = Run(config, store, clock=time.monotonic, sample_wait_seconds=0.6)
    w, t = collector(run)
    lrn = learner(run)

    async def scenario() -> None:
        waiting = asyncio.create_task(run.learning.sample_waiting(SampleRequest(worker_id=lrn, batch_size=8)))
        await asyncio.sleep(0.45)
        run.chunks.ingest(chunk(run, w, t, "c0"))  # 32: the least a draw takes
        await asyncio.sleep(0.3)  # 0.75 s after the request, 0.3 s after c0
        assert not waiting.done()
        for i in range(1, 4):
            run.chunks.ingest(chunk(run, w, t, f"c{i}"))
        resp = SampleResponse.model_validate_json(await asyncio.wait_for(waiting, 5))
        assert served_chunk_ids(resp) == ["c0", "c1", "c2", "c3"]

    asyncio.run(scenario())


# ----- chunk layout validation ------------------------------------------------------------------------------

FOUR_BY_EIGHT = {"num_envs": 4, "chunk_steps": 8}  # the run's chunks: 4 envs x 8 steps = 32 rows


@pytest.mark.parametrize(("config", "changes", "message"), [
    (FOUR_BY_EIGHT, {"env_steps": 30}, "must be a multiple of num_envs"),
    (FOUR_BY_EIGHT, {"env_steps": 34}, "must be a multiple of num_envs"),
    (FOUR_BY_EIGHT, {"num_envs": 3}, "num_envs is 3; this run's collectors step collector.num_envs=4"),
    (FOUR_BY_EIGHT, {"num_envs": 8}, "num_envs is 8"),
    (FOUR_BY_EIGHT, {"env_steps": 28}, r"must be num_envs x collector.chunk_steps = 32"),
    (FOUR_BY_EIGHT, {"env_steps": 36}, r"must be num_envs x collector.chunk_steps = 32"),
    ({**FOUR_BY_EIGHT, "n_episode": 2}, {"env_steps": 36}, r"exceeds num_envs x collector.chunk_steps = 32"),
    (FOUR_BY_EIGHT, {"ends": [32]}, "strictly ascending row indices below env_steps"),
    (FOUR_BY_EIGHT, {"ends": [3, 40]}, "strictly ascending"),
    (FOUR_BY_EIGHT, {"ends": [5, 5]}, "strictly ascending"),
    (FOUR_BY_EIGHT, {"ends": [9, 3]}, "strictly ascending"),
    (FOUR_BY_EIGHT, {"ends": []}, "1 episodes reported but only 0 episode ends"),
    (FOUR_BY_EIGHT, {"ends": [7], "env_errors": 2}, r"env_errors \(2\) exceeds the episode ends \(1\)"),
    (FOUR_BY_EIGHT, {"fresh_columns": [4]}, "distinct env columns below num_envs"),
    (FOUR_BY_EIGHT, {"fresh_columns": [1, 1]}, "distinct env columns"),
    (FOUR_BY_EIGHT, {"policy_version": 1}, "policy_version 1 was never published"),
])
def test_inconsistent_chunk_layout_is_invalid_and_counts_nothing(make_run: Callable[..., Run], run_config: RunConfig,
                                                                 config: dict[str, Any], changes: dict[str, Any],
                                                                 message: str) -> None:
    run = make_run(layout(run_config, **config))
    w, t = collector(run)
    before = counters(run)
    report = chunk(run, w, t, "bad", returns=(5.0,), **changes)
    with pytest.raises(Invalid, match=message) as err:
        run.chunks.ingest(report)
    assert err.value.status == 422
    assert counters(run) == before == (0, 0, 0, 0, 0, 0)
    assert "bad" not in run.ctx.data.ledger and "bad" not in run.ctx.data.buffer
    assert run.status().policy_lag.ingest_histogram == {}
    if rows(run.ctx.config) <= run.ctx.config.replay.capacity_transitions:  # the declared layout itself is fine
        assert run.chunks.ingest(chunk(run, w, t, "good", returns=(5.0,))).duplicate is False


def test_a_consistent_multi_env_layout_is_accepted(make_run: Callable[..., Run], run_config: RunConfig) -> None:
    run = make_run(layout(run_config, num_envs=4, chunk_steps=500))  # 2000 rows: the whole capacity
    w, t = collector(run)
    run.chunks.ingest(chunk(run, w, t, "ok", ends=[0, 5, 1999], fresh_columns=[0, 3]))
    assert counters(run) == (2000, 0, 1, 2000, 1, 2000)
    (entry,) = run.ctx.data.buffer.entries()
    assert (entry.num_envs, entry.ends, entry.fresh_columns) == (4, (0, 5, 1999), (0, 3))


def test_chunks_cut_by_episode_count_may_be_shorter(make_run: Callable[..., Run], run_config: RunConfig) -> None:
    run = make_run(layout(run_config, num_envs=4, chunk_steps=8, n_episode=2))  # at most 32 rows
    w, t = collector(run)
    for cid, env_steps in (("whole", 32), ("short", 12), ("one-step", 4)):
        assert run.chunks.ingest(chunk(run, w, t, cid, env_steps=env_steps, returns=(1.0, 2.0))).duplicate is False
    assert counters(run) == (48, 6, 3, 48, 3, 48)


# ----- policy lag -------------------------------------------------------------------------------------------


def test_policy_lag_counts_ingest_lags_and_sampled_lags(make_run: Callable[..., Run], run_config: RunConfig,
                                                        store: LocalStore) -> None:
    run = make_run(prioritized(run_config))
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "a", policy_version=0))  # latest 0: lag 0
    for version in (1, 2, 3):
        publish(run, store, lrn, version)
    run.chunks.ingest(chunk(run, w, t, "b", policy_version=3))  # lag 0
    run.chunks.ingest(chunk(run, w, t, "c", policy_version=2))  # lag 1
    run.chunks.ingest(chunk(run, w, t, "d", policy_version=1))  # lag 2
    run.chunks.ingest(chunk(run, w, t, "e", policy_version=1))  # lag 2
    lag = run.status().policy_lag
    assert lag.ingest_histogram == {"0": 2, "1": 1, "2": 2}
    assert lag.ingest_max == 2
    assert lag.ingest_mean == pytest.approx(5 / 5)
    assert (lag.sampled_mean, lag.sampled_max) == (0.0, 0)

    resp = sample(run, lrn, 200)
    lags = [3 - resp.chunks[k].policy_version for k in resp.chunk_index]
    assert set(lags) == {0, 1, 2, 3}  # "a" (v0) now lags by 3
    lag = run.status().policy_lag
    assert lag.sampled_max == 3
    assert lag.sampled_mean == pytest.approx(float(np.mean(lags)))
    publish(run, store, lrn, 4)
    resp2 = sample(run, lrn, 100)
    lags += [4 - resp2.chunks[k].policy_version for k in resp2.chunk_index]
    lag = run.status().policy_lag
    assert lag.sampled_max == 4
    assert lag.sampled_mean == pytest.approx(float(np.mean(lags)))
    assert lag.ingest_histogram == {"0": 2, "1": 1, "2": 2}  # sampling does not touch ingest stats


def test_policy_lag_histogram_collects_the_tail(make_run: Callable[..., Run], run_config: RunConfig,
                                                store: LocalStore) -> None:
    run = make_run(make_config(run_config, replay={"min_transitions": 1}))
    w, t = collector(run)
    lrn = learner(run)
    for version in range(1, 11):
        publish(run, store, lrn, version)
    run.chunks.ingest(chunk(run, w, t, "a", policy_version=10))
    run.chunks.ingest(chunk(run, w, t, "b", policy_version=2))  # lag 8
    run.chunks.ingest(chunk(run, w, t, "c", policy_version=0))  # lag 10
    lag = run.status().policy_lag
    assert lag.ingest_histogram == {"0": 1, "8+": 2}
    assert lag.ingest_max == 10


# ----- heartbeat long poll ----------------------------------------------------------------------------------


async def poll(run: Run, worker_id: str, newer_than: int | None, wait: float,
               while_paused: bool = False) -> HeartbeatResponse:
    """The heartbeat long poll as the route runs it (on the event loop), its reply parsed."""
    reply = await run.workers.heartbeat_reply(worker_id, "collector", newer_than, wait, while_paused)
    return HeartbeatResponse.model_validate_json(reply)


def test_heartbeat_long_poll_returns_promptly_after_a_publish(run_config: RunConfig, store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    lrn = learner(run)
    publish(run, store, lrn, 1)
    col = register(run, "collector")

    async def scenario() -> tuple[HeartbeatResponse, float]:
        waiting = asyncio.create_task(poll(run, col, newer_than=1, wait=2.0))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # nothing newer than v1 yet: held
        published = time.monotonic()
        publish(run, store, lrn, 2)
        # workers hear of v2 only once its publish is committed, which the event loop learns of after this
        assert run.ctx.directive("collector").policy.version == 1  # type: ignore[union-attr]
        reply = await asyncio.wait_for(waiting, 3)
        return reply, time.monotonic() - published

    reply, delay = asyncio.run(scenario())
    assert delay < 1.0
    assert reply.directive.policy is not None and reply.directive.policy.version == 2
    assert run.ctx.directive("collector").policy == run.ctx.policies.latest


def test_heartbeat_long_poll_times_out_after_wait(run_config: RunConfig, store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    lrn = learner(run)
    publish(run, store, lrn, 1)
    col = register(run, "collector")
    start = time.monotonic()
    reply = asyncio.run(poll(run, col, newer_than=1, wait=0.5))
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 1.5
    assert reply.directive.policy is not None and reply.directive.policy.version == 1
    start = time.monotonic()
    reply = asyncio.run(poll(run, col, newer_than=0, wait=2.0))  # v1 is already newer than 0
    assert time.monotonic() - start < 0.3
    assert reply.directive.policy is not None and reply.directive.policy.version == 1


def test_heartbeat_long_poll_is_capped_at_half_a_lease(run_config: RunConfig, store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0, lease_seconds=1.0)
    col = register(run, "collector")
    assert run.workers.register("collector", "other").max_wait_seconds == 0.5
    start = time.monotonic()
    reply = asyncio.run(poll(run, col, newer_than=0, wait=3600))  # no policy at all: waits, but only 0.5 s
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 1.5
    assert reply.directive.policy is None
    assert run.ctx.fleet.registry.get(col) is not None  # renewed after the wait: the lease still holds


def test_heartbeat_long_poll_ends_when_the_run_ends(run_config: RunConfig, store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    col = register(run, "collector")

    async def scenario() -> HeartbeatResponse:
        waiting = asyncio.create_task(poll(run, col, newer_than=0, wait=6.0))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        run.controls.stop("done")
        return await asyncio.wait_for(waiting, 7)

    start = time.monotonic()
    reply = asyncio.run(scenario())
    assert time.monotonic() - start < 3.0  # the stop answers it, not the 6-s wait (margin for a loaded machine)
    assert reply.directive.run_state == "stopped"


# ----- a pause waited out in a long poll ----------------------------------------------------------------------


async def held(run: Run, worker_id: str, wait: float, release: Callable[[], object]) -> tuple[HeartbeatResponse, float]:
    """A paused collector's `while_paused` poll: held until `release()` is called 0.2 s in; (reply, seconds from
    the release to the reply)."""
    waiting = asyncio.create_task(poll(run, worker_id, None, wait, while_paused=True))
    await asyncio.sleep(0.2)
    assert not waiting.done(), "a paused collector's poll was answered while collection was still paused"
    released = time.monotonic()
    release()
    reply = await asyncio.wait_for(waiting, wait + 1)
    return reply, time.monotonic() - released


def test_the_operators_resume_answers_a_paused_collectors_poll_at_once(run_config: RunConfig,
                                                                       store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    col = register(run, "collector")
    run.controls.pause(True)
    reply, delay = asyncio.run(held(run, col, 3.0, lambda: run.controls.pause(False)))
    assert delay < 0.5  # not the 3 s it may wait
    assert reply.directive.pause_seconds == 0.0


def test_the_rate_limiter_letting_collectors_go_answers_their_polls_at_once(run_config: RunConfig,
                                                                           store: LocalStore) -> None:
    """The limiter holds collectors (the normal state of a learner-bound run) until the learner's samples
    bring the ratio back within its tolerance: that sample releases the waiting collectors."""
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    w, t = collector(run)
    lrn = learner(run)
    for i in range(19):  # min 64, spi 8, tolerance 512: 608 inserted puts collectors ahead by 256 samples
        run.chunks.ingest(chunk(run, w, t, f"c{i}"))
    assert run.ctx.directive("collector").pause_seconds == PAUSE_SECONDS
    sample(run, lrn, 128)  # still ahead: the poll stays held
    reply, delay = asyncio.run(held(run, w, 3.0, lambda: sample(run, lrn, 129)))
    assert delay < 0.5
    assert reply.directive.pause_seconds == 0.0


def test_a_paused_collectors_poll_renews_its_lease_and_answers_after_its_wait(run_config: RunConfig,
                                                                               store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0, lease_seconds=1.0)
    col = register(run, "collector")
    run.controls.pause(True)
    start = time.monotonic()
    reply = asyncio.run(poll(run, col, None, 3600, while_paused=True))  # capped at half the lease
    assert 0.45 <= time.monotonic() - start < 1.5
    assert reply.directive.pause_seconds == PAUSE_SECONDS  # still paused: poll again
    assert run.ctx.fleet.registry.get(col) is not None


def test_while_paused_answers_at_once_when_nothing_is_paused_for_the_caller(run_config: RunConfig,
                                                                            store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    col, lrn = register(run, "collector"), learner(run)
    start = time.monotonic()
    assert asyncio.run(poll(run, col, None, 2.0, while_paused=True)).directive.pause_seconds == 0.0
    run.controls.pause(True)
    reply = asyncio.run(run.workers.heartbeat_reply(lrn, "learner", None, 2.0, while_paused=True))
    assert HeartbeatResponse.model_validate_json(reply).directive.pause_seconds == 0.0  # a learner never pauses
    assert time.monotonic() - start < 0.5
    with pytest.raises(Invalid, match="newer_than or while_paused"):
        asyncio.run(poll(run, col, 0, 2.0, while_paused=True))


def test_a_paused_collectors_poll_ends_when_the_run_ends(run_config: RunConfig, store: LocalStore) -> None:
    run = Run(run_config, store, clock=time.monotonic, sample_wait_seconds=0)
    col = register(run, "collector")
    run.controls.pause(True)
    reply, delay = asyncio.run(held(run, col, 3.0, lambda: run.controls.stop("done")))
    assert delay < 0.5
    assert reply.directive.run_state == "stopped"


def test_lag_mean_is_exact_beyond_the_histogram_tail() -> None:
    from rlfleet.coordinator.state.lag import LagStats

    stats = LagStats()
    for lag in (0, 8, 10):
        stats.ingested(lag)
    status = stats.status()
    assert status.ingest_mean == 6.0 and status.ingest_max == 10
    assert status.ingest_histogram == {"0": 1, "8+": 2}
    restored = LagStats()
    restored.restore(stats.state())
    assert restored.status() == status
