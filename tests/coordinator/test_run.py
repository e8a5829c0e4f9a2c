"""coordinator.run.Run with a fake clock and a real LocalStore: the run's rules, without HTTP."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlfleet.coordinator.errors import Conflict, Forbidden, GroupFull, Invalid, NotEnoughData, TaskNotHeld, UnknownWorker
from rlfleet.coordinator.operations.context import PAUSE_SECONDS
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.state.dataplane import BUFFER_ID
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import chunk_path, policy_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import sha256_hex
from rlfleet.shared.wire import (
    CollectorTask,
    EvaluationReport,
    EvaluatorTask,
    LearnerTask,
    LearnReport,
    PolicyPublish,
    PolicyRef,
    SampleRequest,
)
from tests.support.configs import layout, make_config
from tests.support.journal import fill_journal, free_journal
from tests.support.run import (
    FakeClock,
    chunk,
    collector,
    counters,
    evaluate,
    holdout,
    learner,
    publish,
    register,
    settle_files,
)

# ----- helpers ---------------------------------------------------------------------------------------------


















# ----- register / claim ------------------------------------------------------------------------------------


def test_register_reply(run: Run) -> None:
    reply = run.workers.register("collector", "host-1")
    assert reply.run_name == "test-run"
    assert reply.lease_seconds == 10.0
    assert reply.heartbeat_seconds == 2.5
    assert reply.max_wait_seconds == 5.0
    assert reply.directive.run_state == "running"
    assert reply.directive.policy is None
    assert reply.directive.env_steps_total == 0
    assert run.ctx.fleet.registry.get(reply.worker_id).kind == "collector"  # type: ignore[union-attr]


def test_collector_tasks_created_on_demand_and_claim_is_idempotent(run: Run, run_config: RunConfig) -> None:
    a = register(run, "collector")
    b = register(run, "collector")
    task_a = run.workers.claim(a).task
    task_b = run.workers.claim(b).task
    assert isinstance(task_a, CollectorTask) and isinstance(task_b, CollectorTask)
    assert (task_a.task_id, task_b.task_id) == ("collector-0", "collector-1")
    assert task_a.collector == run_config.collector
    assert task_a.env == run_config.env
    assert task_a.spaces.obs.shape == (4,) and task_a.behaviour.head == "q_values"
    assert task_a.policy is None
    assert task_a.seed != task_b.seed
    again = run.workers.claim(a).task
    assert again == task_a  # the same task, not a new one
    assert run.ctx.fleet.tasks.tasks["collector-0"].claims == 1
    assert sorted(t for t in run.ctx.fleet.tasks.tasks if t.startswith("collector")) == ["collector-0", "collector-1"]


def test_learner_and_evaluator_tasks_exist_once(run: Run) -> None:
    l1, l2 = register(run, "learner"), register(run, "learner")
    task = run.workers.claim(l1).task
    assert isinstance(task, LearnerTask)
    assert (task.task_id, task.buffer_id) == ("learner-0", BUFFER_ID)
    assert run.workers.claim(l2).task is None  # no on-demand learner tasks
    e1 = register(run, "evaluator")
    ev = run.workers.claim(e1).task
    assert isinstance(ev, EvaluatorTask) and ev.task_id == "evaluator-0"
    assert ev.evaluation.episodes == 4
    assert run.workers.claim(register(run, "evaluator")).task is None
    assert {"learner-1", "evaluator-1"}.isdisjoint(run.ctx.fleet.tasks.tasks)


def test_a_learner_group_has_one_learner_task_per_rank_and_refuses_more(make_run: Callable[..., Run],
                                                                        run_config: RunConfig,
                                                                        clock: FakeClock) -> None:
    run = make_run(make_config(run_config, learner={"replicas": 2, "rendezvous": "learner-0.rlfleet:29400"}))
    a, b = register(run, "learner"), register(run, "learner")
    tasks = [run.workers.claim(a).task, run.workers.claim(b).task]
    assert [t.task_id for t in tasks if isinstance(t, LearnerTask)] == ["learner-0", "learner-1"]
    assert {(t.learner.replicas, t.learner.rendezvous) for t in tasks if isinstance(t, LearnerTask)} == {
        (2, "learner-0.rlfleet:29400")}
    with pytest.raises(GroupFull, match=rf"learner.replicas is 2 .*learner-0 by {a}, learner-1 by {b}"):
        run.workers.claim(register(run, "learner"))
    status = run.status().learner
    assert status.world_size == 2
    assert [(r.task_id, r.worker_id) for r in status.ranks] == [("learner-0", a), ("learner-1", b)]

    clock.advance(6)
    run.workers.heartbeat(a)
    clock.advance(5)  # b silent for 11 s: its rank is free, and a new learner takes exactly that one
    run.tick()
    ranks = run.status().learner.ranks
    assert [(r.task_id, r.worker_id) for r in ranks] == [("learner-0", a), ("learner-1", None)]
    assert ranks[0].last_seen_seconds_ago == pytest.approx(5)
    c = register(run, "learner")
    task = run.workers.claim(c).task
    assert isinstance(task, LearnerTask) and task.task_id == "learner-1"


def test_a_restarted_rank_registering_under_its_fixed_id_gets_its_task_back(make_run: Callable[..., Run],
                                                                            run_config: RunConfig) -> None:
    """torchrun restarts every rank of a re-formed group: each registers with its fixed request id (run and rank,
    learner_worker/elastic.py) and gets the worker and task it held, where a fresh id would find both held."""
    run = make_run(make_config(run_config, learner={"replicas": 2}))
    ids = [run.workers.register("learner", "host", request_id=f"run.rank-{rank}").worker_id for rank in (0, 1)]
    held = [run.workers.claim(worker_id).task for worker_id in ids]
    again = [run.workers.register("learner", "host", restarts=1, request_id=f"run.rank-{rank}").worker_id
             for rank in (0, 1)]
    assert again == ids
    assert [run.workers.claim(worker_id).task for worker_id in again] == held
    with pytest.raises(GroupFull):
        run.workers.claim(run.workers.register("learner", "host", request_id="run.rank-2").worker_id)


def test_unknown_worker_and_scope_checks(run: Run) -> None:
    with pytest.raises(UnknownWorker):
        run.workers.claim("collector-99-abcdef")
    with pytest.raises(UnknownWorker):
        run.workers.heartbeat("nobody")
    c = register(run, "collector")
    with pytest.raises(Forbidden):
        run.workers.heartbeat(c, scope="learner")
    with pytest.raises(Forbidden):
        run.workers.claim(c, scope="evaluator")
    assert run.workers.heartbeat(c, scope="collector").directive.run_state == "running"
    assert run.workers.heartbeat(c, scope="admin").lease_seconds == 10.0


# ----- ingest -----------------------------------------------------------------------------------------------


def test_ingest_counts_exactly(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    ack = run.chunks.ingest(chunk(run, w, t, "c1", returns=[10.0, 20.0]))  # 2 envs x 16 steps
    assert ack.chunk_id == "c1" and ack.duplicate is False
    assert ack.directive.env_steps_total == 32
    ack = run.chunks.ingest(chunk(run, w, t, "c2", returns=[30.0]))
    assert ack.directive.env_steps_total == 64
    assert counters(run) == (64, 3, 2, 64, 2, 64)
    assert run.status().recent_return_mean == pytest.approx(20.0)
    assert [e.chunk_id for e in run.ctx.data.buffer.entries()] == ["c1", "c2"]
    assert run.ctx.data.buffer.entries()[0].payload_path == "chunks/collector-0/c1.msgpack"


def test_status_counts_each_workers_chunks_in_the_buffer(run: Run, store: LocalStore) -> None:
    """How one sees that a collector's data arrives (docker/e2e.sh checks the third collector with it)."""
    (a, ta), (b, tb), trainer = collector(run), collector(run), learner(run)
    for i in range(3):
        run.chunks.ingest(chunk(run, a, ta, f"a{i}"))
    run.chunks.ingest(chunk(run, b, tb, "b0"))
    run.chunks.ingest(chunk(run, b, tb, "b0"))  # a retried report counts once
    buffered = {w.worker_id: w.buffered_chunks for w in run.status().workers}
    assert buffered[a] == 3 and buffered[b] == 1 and buffered[trainer] == 0


def test_ingest_many_chunks_counters_exact(make_run: Callable[..., Run], run_config: RunConfig) -> None:
    # chunks cut after 5 episodes or 50 steps of one env: any size from 5 to 50 rows
    run = make_run(layout(run_config, num_envs=1, chunk_steps=50, n_episode=5))
    rng = np.random.default_rng(5)
    w, t = collector(run)
    steps = episodes = 0
    all_returns: list[float] = []
    for i in range(40):
        n = int(rng.integers(5, 51))
        rets = [float(x) for x in rng.uniform(0, 500, int(rng.integers(0, 6)))]
        run.chunks.ingest(chunk(run, w, t, f"chunk-{i}", env_steps=n, returns=rets))
        steps, episodes = steps + n, episodes + len(rets)
        all_returns += rets
    s = run.status()
    assert (s.env_steps, s.episodes, s.chunks, s.duplicate_chunks) == (steps, episodes, 40, 0)
    assert s.buffers[0].transitions == sum(e.transitions for e in run.ctx.data.buffer.entries())
    assert s.buffers[0].chunks + s.buffers[0].evicted_chunks == 40
    assert s.recent_return_mean == pytest.approx(float(np.mean(all_returns[-100:])))


def test_ingest_requires_canonical_payload_path(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    before = counters(run)
    for path in ["chunks/collector-0/other.msgpack", "chunks/collector-1/c1.msgpack", "chunks/collector-0/c1",
                 "policies/c1.msgpack", "c1.msgpack"]:
        store.put(path, b"payload of c1")
        with pytest.raises(Invalid, match="payload_path must be 'chunks/collector-0/c1.msgpack'"):
            run.chunks.ingest(chunk(run, w, t, "c1", write=False, payload=b"payload of c1", payload_path=path))
    assert counters(run) == before


def test_ingest_requires_the_payload_file(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    with pytest.raises(Invalid, match="not in the store"):
        run.chunks.ingest(chunk(run, w, t, "c1", write=False))
    assert counters(run) == (0, 0, 0, 0, 0, 0)
    assert "c1" not in run.ctx.data.ledger


@pytest.mark.parametrize("delta", [-1, 1, 1000])
def test_ingest_requires_the_stated_size(run: Run, store: LocalStore, delta: int) -> None:
    w, t = collector(run)
    report = chunk(run, w, t, "c1")
    bad = report.model_copy(update={"size_bytes": report.size_bytes + delta})
    expected = f"has {report.size_bytes} bytes, report says {report.size_bytes + delta}"
    with pytest.raises(Invalid, match=expected):
        run.chunks.ingest(bad)
    assert counters(run) == (0, 0, 0, 0, 0, 0)
    assert run.chunks.ingest(report).duplicate is False  # the correct report is still accepted afterwards


def test_ingest_for_unknown_or_non_collector_task(run: Run, store: LocalStore) -> None:
    # a collector may report chunks only of the task it holds (409 task_not_held), only as itself (404)
    w, _ = collector(run)
    with pytest.raises(TaskNotHeld, match="collector-7") as err:
        run.chunks.ingest(chunk(run, w, "collector-7", "c1"))
    assert (err.value.status, err.value.code) == (409, "task_not_held")
    with pytest.raises(TaskNotHeld, match="learner-0"):
        run.chunks.ingest(chunk(run, w, "learner-0", "c2"))
    idle = register(run, "collector")  # registered, but holds no task
    with pytest.raises(TaskNotHeld, match="collector-0"):
        run.chunks.ingest(chunk(run, idle, "collector-0", "c3"))
    with pytest.raises(UnknownWorker):
        run.chunks.ingest(chunk(run, "collector-404-000000", "collector-0", "c4"))
    with pytest.raises(Forbidden):
        run.chunks.ingest(chunk(run, learner(run), "learner-0", "c5"))
    assert counters(run) == (0, 0, 0, 0, 0, 0)


def test_duplicate_chunk_same_sha_is_acknowledged_without_counting(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    report = chunk(run, w, t, "c1", returns=[5.0])
    assert run.chunks.ingest(report).duplicate is False
    before = counters(run)
    for expected_dups in (1, 2):
        ack = run.chunks.ingest(report)
        assert ack.duplicate is True and ack.chunk_id == "c1"
        assert counters(run) == before
        assert run.status().duplicate_chunks == expected_dups
    assert len(run.ctx.data.buffer) == 1


def test_same_chunk_id_different_sha_conflicts(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    first = chunk(run, w, t, "c1", payload=b"AAAA")
    run.chunks.ingest(first)
    before = counters(run)
    store.put(first.payload_path, b"BBBB")  # same size, different content
    with pytest.raises(Conflict, match="different content"):
        run.chunks.ingest(first.model_copy(update={"sha256": sha256_hex(b"BBBB")}))
    assert counters(run) == before
    assert run.status().duplicate_chunks == 0
    assert run.ctx.data.ledger.sha256("c1") == sha256_hex(b"AAAA")


def test_ingest_renews_the_reporting_workers_lease(run: Run, store: LocalStore, clock: FakeClock) -> None:
    w, t = collector(run)
    clock.advance(8)
    run.chunks.ingest(chunk(run, w, t, "c1"))
    clock.advance(8)  # 16 s after registering, 8 s after the report
    run.tick()
    assert run.ctx.fleet.registry.get(w) is not None
    assert run.ctx.fleet.tasks.tasks[t].state == "claimed"


def test_eviction_deletes_payload_files(make_run: Callable[..., Run], run_config: RunConfig,
                                        store: LocalStore) -> None:
    run = make_run(layout(run_config, chunk_steps=250))  # chunks of 2 x 250 = 500 rows; capacity 2000
    w, t = collector(run)
    reports = [chunk(run, w, t, f"c{i}") for i in range(6)]
    assert {r.env_steps for r in reports} == {500}
    for r in reports[:4]:
        run.chunks.ingest(r)
    settle_files(run)
    assert all(store.size(r.payload_path) is not None for r in reports[:4])
    run.chunks.ingest(reports[4])  # 2500 > 2000: c0 goes
    settle_files(run)  # files go once the eviction is committed, on the deleter thread
    assert store.size(reports[0].payload_path) is None
    assert not (store.root / reports[0].payload_path).exists()
    run.chunks.ingest(reports[5])  # c1 goes
    settle_files(run)
    assert store.size(reports[1].payload_path) is None
    assert all(store.size(r.payload_path) is not None for r in reports[2:])
    s = run.status()
    buf = s.buffers[0]
    assert (s.chunks, buf.chunks, buf.evicted_chunks, buf.transitions) == (6, 4, 2, 2000)
    assert s.env_steps == 3000  # eviction never un-counts env steps
    assert [e.chunk_id for e in run.ctx.data.buffer.entries()] == ["c2", "c3", "c4", "c5"]


def test_retry_of_acknowledged_chunk_after_its_eviction_is_a_duplicate(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = make_run(layout(run_config, chunk_steps=1000))  # chunks of 2000 rows: the whole capacity
    w, t = collector(run)
    first = chunk(run, w, t, "c0")
    run.chunks.ingest(first)
    run.chunks.ingest(chunk(run, w, t, "c1"))  # overwrites every row of c0: evicted, file deleted
    settle_files(run)
    assert store.size(first.payload_path) is None
    before = counters(run)
    ack = run.chunks.ingest(first)  # e.g. the collector's retry after a timeout
    assert ack.duplicate is True
    assert counters(run) == before


def test_collectors_told_to_pause_when_ahead(run: Run, store: LocalStore) -> None:
    # min 64, spi 8, tolerance 512: collectors are ahead once (inserted - 64) * 8 > 8 * 512, i.e. > 576
    w, t = collector(run)
    for i in range(18):  # 18 chunks of 32 rows: exactly 576
        ack = run.chunks.ingest(chunk(run, w, t, f"c{i}"))
    assert run.ctx.data.limiter.inserted == 576
    assert ack.directive.pause_seconds == 0.0
    ack = run.chunks.ingest(chunk(run, w, t, "c18"))
    assert ack.directive.pause_seconds == PAUSE_SECONDS
    assert run.workers.heartbeat(w).directive.pause_seconds == PAUSE_SECONDS
    lrn = register(run, "learner")
    assert run.workers.heartbeat(lrn).directive.pause_seconds == 0.0  # only collectors pause


# ----- sampling ---------------------------------------------------------------------------------------------


def test_sample_not_enough_data_below_min_size(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    lrn = learner(run)
    with pytest.raises(NotEnoughData):
        run.learning.sample(SampleRequest(worker_id=lrn, batch_size=1))
    run.chunks.ingest(chunk(run, w, t, "c1"))  # 32 rows; min_transitions is 64
    with pytest.raises(NotEnoughData, match="32 inserted transitions"):
        run.learning.sample(SampleRequest(worker_id=lrn, batch_size=1))
    assert run.ctx.data.limiter.sampled == 0
    run.chunks.ingest(chunk(run, w, t, "c2"))  # exactly 64
    assert len(run.learning.sample(SampleRequest(worker_id=lrn, batch_size=1)).offsets) == 1


def test_sample_returns_valid_references(make_run: Callable[..., Run], run_config: RunConfig,
                                        store: LocalStore) -> None:
    run = make_run(layout(run_config, num_envs=1, chunk_steps=100, n_episode=1))  # chunks of 1 to 100 rows
    w, t = collector(run)
    lrn = learner(run)
    sizes = {"a": 40, "b": 1, "c": 100}
    for cid, n in sizes.items():
        run.chunks.ingest(chunk(run, w, t, cid, env_steps=n))
    resp = run.learning.sample(SampleRequest(worker_id=lrn, batch_size=32, num_batches=4))
    assert resp.batch_size == 32
    assert len(resp.chunk_index) == len(resp.offsets) == 128
    assert resp.buffer_transitions == 141
    ids = [c.chunk_id for c in resp.chunks]
    assert len(ids) == len(set(ids)) and set(ids) <= set(sizes)
    for c in resp.chunks:
        assert c.payload_path == chunk_path(t, c.chunk_id)
        assert c.sha256 == sha256_hex(f"payload of {c.chunk_id}".encode())
        assert store.get(c.payload_path, sha256=c.sha256)  # the reference points at a real, intact file
    for k, off in zip(resp.chunk_index, resp.offsets, strict=True):
        assert 0 <= k < len(resp.chunks)
        assert 0 <= off < sizes[resp.chunks[k].chunk_id]
    assert run.ctx.data.limiter.sampled == 128
    assert resp.directive.run_state == "running"


def test_sample_requires_a_claimed_learner_task(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    run.chunks.ingest(chunk(run, w, t, "c1"))
    run.chunks.ingest(chunk(run, w, t, "c2"))  # 64: enough to sample
    unclaimed = register(run, "learner")
    with pytest.raises(Conflict, match="holds no learner task"):
        run.learning.sample(SampleRequest(worker_id=unclaimed, batch_size=1))
    with pytest.raises(Forbidden):
        run.learning.sample(SampleRequest(worker_id=w, batch_size=1))
    with pytest.raises(UnknownWorker):
        run.learning.sample(SampleRequest(worker_id="learner-404-000000", batch_size=1))
    assert run.ctx.data.limiter.sampled == 0


def test_sample_rate_limited_by_samples_per_insert(run: Run, store: LocalStore) -> None:
    # with exactly min_transitions (64) inserted, the learner may sample spi * tolerance = 4096 transitions
    w, t = collector(run)
    lrn = learner(run)
    run.chunks.ingest(chunk(run, w, t, "c0"))
    run.chunks.ingest(chunk(run, w, t, "c1"))  # 2 x 32 = 64
    request = SampleRequest(worker_id=lrn, batch_size=64)
    for _ in range(64):
        run.learning.sample(request)
    with pytest.raises(NotEnoughData, match="ahead of samples_per_insert"):
        run.learning.sample(request)
    assert run.ctx.data.limiter.sampled == 4096
    run.chunks.ingest(chunk(run, w, t, "c2"))  # 32 inserts buy 256 samples at spi=8
    for _ in range(4):
        run.learning.sample(request)
    with pytest.raises(NotEnoughData):
        run.learning.sample(SampleRequest(worker_id=lrn, batch_size=1))
    assert run.status().learner.samples_per_insert == pytest.approx(4352 / 32)


def test_sample_is_deterministic_for_the_run_seed(make_run: Callable[..., Run], store: LocalStore) -> None:
    results = []
    for _ in range(2):
        r = make_run()
        w, t = collector(r)
        for i in range(5):
            r.chunks.ingest(chunk(r, w, t, f"c{i}"))
        resp = r.learning.sample(SampleRequest(worker_id=learner(r), batch_size=16))
        results.append(([c.chunk_id for c in resp.chunks], resp.chunk_index, resp.offsets))
    assert results[0] == results[1]


# ----- learner reports and policies -------------------------------------------------------------------------


def test_learn_report_updates_status(run: Run) -> None:
    lrn = learner(run)
    run.learning.learn_report(LearnReport(worker_id=lrn, iteration=7, losses={"td": 0.5, "q_mean": 3.0},
                                 transitions_trained=224))
    s = run.status().learner
    assert (s.iteration, s.transitions_trained, s.losses) == (7, 224, {"td": 0.5, "q_mean": 3.0})
    with pytest.raises(Forbidden):
        run.learning.learn_report(LearnReport(worker_id=register(run, "collector"), iteration=1,
                                     transitions_trained=0))


def test_failed_learner_hooks_show_in_status_with_their_first_error_for_the_whole_run(run: Run) -> None:
    lrn = learner(run)
    boom = {"tests.support.hooks:boom@every": "at iteration 10: ValueError: boom"}
    run.learning.learn_report(LearnReport(worker_id=lrn, iteration=10, transitions_trained=64, hooks_failed=boom))
    run.learning.learn_report(LearnReport(worker_id=lrn, iteration=20, transitions_trained=128))  # a restarted learner
    assert run.status().learner.hooks_failed == boom
    run.learning.learn_report(LearnReport(worker_id=lrn, iteration=30, transitions_trained=192, hooks_failed={
        "tests.support.hooks:boom@every": "at iteration 30: ValueError: boom",
        "tests.support.hooks:record@end": "OSError"}))
    assert run.status().learner.hooks_failed == {**boom, "tests.support.hooks:record@end": "OSError"}


def test_policy_publish_and_distribution(run: Run, store: LocalStore) -> None:
    lrn = learner(run)
    ref = publish(run, store, lrn, 1, iteration=100)
    assert run.ctx.policies.latest == ref
    c = register(run, "collector")
    task = run.workers.claim(c).task
    assert isinstance(task, CollectorTask) and task.policy == ref
    assert run.workers.heartbeat(c).directive.policy == ref
    s = run.status()
    assert (s.policy_version, s.learner.iteration) == (1, 100)


def test_policy_versions_are_monotonic(run: Run, store: LocalStore) -> None:
    lrn = learner(run)
    v1 = publish(run, store, lrn, 1)
    # same version and sha: an idempotent retry
    run.publishing.publish_policy(PolicyPublish(worker_id=lrn, policy=v1, iteration=0))
    assert list(run.ctx.policies.versions) == [v1]
    # same version, other content
    store.put("policies/v1-other", b"other weights")
    other = PolicyRef(version=1, path="policies/v1-other", sha256=sha256_hex(b"other weights"))
    with pytest.raises(Conflict, match="not newer"):
        run.publishing.publish_policy(PolicyPublish(worker_id=lrn, policy=other, iteration=0))
    v3 = publish(run, store, lrn, 3)  # versions may skip
    with pytest.raises(Conflict):
        publish(run, store, lrn, 2)
    with pytest.raises(Conflict):  # an older version, even re-sent with its original sha
        run.publishing.publish_policy(PolicyPublish(worker_id=lrn, policy=v1, iteration=0))
    assert list(run.ctx.policies.versions) == [v1, v3]
    assert run.status().policy_version == 3


def test_policy_publish_validation(run: Run, store: LocalStore) -> None:
    lrn = learner(run)
    with pytest.raises(Invalid, match="not in the store"):
        run.publishing.publish_policy(PolicyPublish(worker_id=lrn, iteration=0, policy=PolicyRef(
            version=1, path=policy_path(1), sha256="0" * 64)))
    store.put("chunks/x/weights", b"w")
    with pytest.raises(Invalid, match="under 'policies/'"):
        run.publishing.publish_policy(PolicyPublish(worker_id=lrn, iteration=0, policy=PolicyRef(
            version=1, path="chunks/x/weights", sha256=sha256_hex(b"w"))))
    collector_id = register(run, "collector")
    store.put(policy_path(1), b"w")
    with pytest.raises(Forbidden):
        run.publishing.publish_policy(PolicyPublish(worker_id=collector_id, iteration=0, policy=PolicyRef(
            version=1, path=policy_path(1), sha256=sha256_hex(b"w"))))
    assert run.ctx.policies.latest is None


def test_old_policy_files_beyond_keep_policies_deleted(make_run: Callable[..., Run],
                                                      store: LocalStore) -> None:
    run = make_run(keep_policies=3)
    lrn = learner(run)
    refs = [publish(run, store, lrn, v) for v in range(1, 6)]
    assert [p.version for p in run.ctx.policies.versions] == [3, 4, 5]
    settle_files(run)  # dropped versions' files go on the deleter thread, once the drop is committed
    for ref in refs[:2]:
        assert store.size(ref.path) is None
    for ref in refs[2:]:
        assert store.get(ref.path, sha256=ref.sha256)


# ----- evaluation and run end -------------------------------------------------------------------------------






def test_evaluation_requires_a_published_policy(run: Run, store: LocalStore) -> None:
    ev = register(run, "evaluator")
    with pytest.raises(Invalid, match="never published"):
        evaluate(run, ev, 1, [10.0] * 4)
    publish(run, store, learner(run), 1)
    with pytest.raises(Invalid, match="never published"):
        evaluate(run, ev, 2, [10.0] * 4)
    with pytest.raises(Invalid, match="same number"):
        run.evaluations.evaluate(EvaluationReport(worker_id=ev, policy_version=1, returns=[1.0, 2.0], lengths=[1]))
    for episodes in (1, 3, 5):  # exactly evaluation.episodes (4): one lucky episode cannot end a run
        with pytest.raises(Invalid, match="evaluation.episodes=4"):
            evaluate(run, ev, 1, [500.0] * episodes)
    with pytest.raises(Forbidden):
        evaluate(run, register(run, "collector"), 1, [10.0] * 4)
    assert run.evaluations.history() == []


def test_evaluation_below_threshold_keeps_running(run: Run, store: LocalStore, clock: FakeClock) -> None:
    lrn = learner(run)
    ev = register(run, "evaluator")
    publish(run, store, lrn, 1)
    publish(run, store, lrn, 2)
    clock.advance(30)
    r1 = evaluate(run, ev, 2, [100.0, 200.0, 300.0, 400.0])
    assert (r1.mean, r1.std, r1.episodes, r1.solved) == (250.0, pytest.approx(111.80339887), 4, False)
    assert r1.wall_seconds == 30.0 and r1.policy_version == 2
    r2 = evaluate(run, ev, 1, [474.9] * 4)  # evaluating an older version is fine
    evaluate(run, ev, 2, [10.0] * 4)
    s = run.status()
    assert s.run_state == "running"
    assert s.best_evaluation == r2
    assert s.latest_evaluation is not None and s.latest_evaluation.mean == 10.0
    assert len(run.evaluations.history()) == 3


def test_evaluation_at_threshold_solves_the_run(run: Run, store: LocalStore, clock: FakeClock) -> None:
    w, t = collector(run)
    lrn = learner(run)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    run.chunks.ingest(chunk(run, w, t, "c1"))
    publish(run, store, lrn, 1)
    clock.advance(42)
    result = evaluate(run, ev, 1, [475.0, 475.0, 470.0, 480.0])  # mean == 475.0 == solve_threshold
    assert result.solved is True and result.test_requested is True and result.env_steps == 32
    assert run.ctx.lifecycle.state == "running"  # a validation pass only nominates: the held-out test decides
    test = holdout(run, ev, 1, [475.0, 485.0] * 50)  # re-test bound 480 - 1.66039·5.025·√0.02 = 478.8 >= 475
    assert test.confirmed and test.mean == 480.0 and test.validation_mean == 475.0 and test.episodes == 100
    half = 1.98422 * 5.02519 / 10  # Student's t with the sample std
    assert test.ci95 == (pytest.approx(480.0 - half, abs=1e-4), pytest.approx(480.0 + half, abs=1e-4))
    assert run.ctx.lifecycle.state == "solved"
    assert "confirmed by a held-out test: 480.0" in run.ctx.lifecycle.message and "v1" in run.ctx.lifecycle.message
    assert run.status().confirmed_by == test
    # every directive says so once the end is durable, and no more work is handed out
    run.ctx.flush()
    assert run.workers.heartbeat(w).directive.run_state == "solved"
    assert run.workers.heartbeat(lrn).directive.run_state == "solved"
    claim = run.workers.claim(register(run, "collector"))
    assert claim.task is None and claim.directive.run_state == "solved"
    assert run.chunks.ingest(chunk(run, w, t, "c2")).directive.run_state == "solved"
    clock.advance(100)
    s = run.status()
    assert s.run_state == "solved"
    assert s.wall_seconds == 42.0  # frozen at the end
    # a later event cannot overwrite the final state
    run.controls.stop("too late")
    run.tick()
    assert (run.ctx.lifecycle.state, run.status().run_message) == ("solved", s.run_message)


def test_env_step_budget_exhausts_the_run(make_run: Callable[..., Run], run_config: RunConfig,
                                          store: LocalStore) -> None:
    run = make_run(make_config(run_config, budget={"max_env_steps": 96}))
    w, t = collector(run)
    run.chunks.ingest(chunk(run, w, t, "c1"))
    run.chunks.ingest(chunk(run, w, t, "c2"))  # 64
    assert run.ctx.lifecycle.state == "running"
    run.chunks.ingest(chunk(run, w, t, "c3"))  # exactly 96
    assert run.ctx.lifecycle.state == "budget_exhausted"
    run.ctx.flush()  # workers are told once the end is durable
    assert run.workers.heartbeat(w).directive.run_state == "budget_exhausted"
    assert "96" in run.ctx.lifecycle.message
    assert run.status().env_steps == 96


def test_wall_budget_via_tick(make_run: Callable[..., Run], run_config: RunConfig, clock: FakeClock) -> None:
    run = make_run(make_config(run_config, budget={"max_wall_seconds": 60}))
    c = register(run, "collector")
    clock.advance(59.9)
    run.workers.heartbeat(c)
    run.tick()
    assert run.ctx.lifecycle.state == "running"
    clock.advance(0.1)
    run.tick()
    assert run.ctx.lifecycle.state == "budget_exhausted"
    assert "60s" in run.ctx.lifecycle.message
    run.ctx.flush()
    assert run.workers.heartbeat(c).directive.run_state == "budget_exhausted"
    clock.advance(500)
    assert run.status().wall_seconds == pytest.approx(60.0)


def test_stop(run: Run, clock: FakeClock) -> None:
    clock.advance(5)
    run.controls.stop("operator said so")
    status = run.status()
    assert (status.run_state, status.run_message) == ("stopped", "operator said so")
    assert status.wall_seconds == 5.0
    run.controls.stop("again")
    assert run.ctx.lifecycle.message == "operator said so"


def test_workers_hear_of_an_end_only_once_it_is_durable(run: Run) -> None:
    """A worker told the run ended exits for good: told of an end whose commit then failed (the run rolled
    back to running), every worker would leave a running run."""
    w, _ = collector(run)
    run.ctx.flush()
    fill_journal(run.ctx.journal)
    run.controls.stop("operator")  # its commit fails on the full disk
    assert run.ctx.lifecycle.state == "stopped"  # the operation itself sees it...
    assert run.workers.heartbeat(w).directive.run_state == "running"  # ...workers are not told: it may not hold
    run.ctx.flush()
    assert run.workers.heartbeat(w).directive.run_state == "running"
    free_journal(run.ctx.journal)
    run.ctx.recover()  # what the stop's reply (a 503) does
    assert run.ctx.lifecycle.state == "running"
    assert run.workers.heartbeat(w).directive.run_state == "running"
    run.controls.stop("operator, again")
    run.ctx.flush()
    assert run.workers.heartbeat(w).directive.run_state == "stopped"


def test_wall_seconds_frozen_when_run_ended_at_clock_zero(run_config: RunConfig, store: LocalStore) -> None:
    clock = FakeClock(0.0)
    run = Run(run_config, store, clock=clock, sample_wait_seconds=0)
    run.controls.stop("immediately")
    clock.advance(50)
    assert run.status().wall_seconds == 0.0


# ----- leases and ticks -------------------------------------------------------------------------------------


def test_lease_expiry_returns_the_task_to_a_new_collector(run: Run, clock: FakeClock) -> None:
    a, task_a = collector(run)
    b, task_b = collector(run)
    seed_a = run.workers.claim(a).task.seed  # type: ignore[union-attr]
    clock.advance(6)
    run.workers.heartbeat(b)
    clock.advance(4)  # a: silent for 10 s == lease; b: 4 s
    run.tick()
    assert run.ctx.fleet.registry.get(a) is None
    assert run.ctx.fleet.registry.get(b) is not None
    assert run.ctx.fleet.tasks.tasks[task_a].state == "pending"
    assert run.ctx.fleet.tasks.tasks[task_a].worker_id is None
    assert run.ctx.fleet.tasks.tasks[task_b].worker_id == b
    with pytest.raises(UnknownWorker):
        run.workers.heartbeat(a)
    c = register(run, "collector")
    task_c = run.workers.claim(c).task
    assert task_c is not None
    assert task_c.task_id == task_a == "collector-0"  # the same task id, not a new one
    assert task_c.seed != seed_a  # a re-claimed task does not replay the same episodes
    assert run.ctx.fleet.tasks.tasks[task_a].claims == 2
    assert "collector-2" not in run.ctx.fleet.tasks.tasks


def test_heartbeats_keep_the_lease(run: Run, clock: FakeClock) -> None:
    a, task = collector(run)
    for _ in range(10):
        clock.advance(9)
        run.workers.heartbeat(a)
        run.tick()
    assert run.ctx.fleet.registry.get(a) is not None
    assert run.ctx.fleet.tasks.tasks[task].worker_id == a


def test_expired_learner_task_can_be_reclaimed(run: Run, clock: FakeClock) -> None:
    old = learner(run)
    clock.advance(11)
    run.tick()
    new = register(run, "learner")
    task = run.workers.claim(new).task
    assert isinstance(task, LearnerTask) and task.task_id == "learner-0"
    assert run.ctx.fleet.tasks.tasks["learner-0"].worker_id == new != old


# ----- status -----------------------------------------------------------------------------------------------


def test_status_is_consistent(make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore,
                              clock: FakeClock) -> None:
    run = make_run(layout(run_config, chunk_steps=250))  # chunks of 500 rows; capacity 2000
    w, t = collector(run)
    idle = register(run, "collector", "idle-host")
    lrn = learner(run)
    run.tick()  # rate sample (t=0 s, 0 steps)
    returns = [float(i) for i in range(150)]
    for i in range(5):
        run.chunks.ingest(chunk(run, w, t, f"c{i}", returns=returns[i * 30:(i + 1) * 30]))
    run.chunks.ingest(chunk(run, w, t, "c0", returns=returns[:30]))  # duplicate
    run.learning.sample(SampleRequest(worker_id=lrn, batch_size=32, num_batches=2))
    clock.advance(8)
    run.tick()  # rate sample (t=8 s, 2500 steps); every lease is still live
    run.learning.learn_report(LearnReport(worker_id=lrn, iteration=3, losses={"td": 1.5}, transitions_trained=64))
    publish(run, store, lrn, 4, iteration=3)
    clock.advance(4)

    s = run.status()
    assert s.run_name == "test-run" and s.run_state == "running" and s.run_message == "training"
    assert s.wall_seconds == 12.0
    assert s.env_steps == 2500 and s.episodes == 150 and s.chunks == 5 and s.duplicate_chunks == 1
    assert s.env_steps_per_second == pytest.approx(2500 / 8)
    assert s.recent_return_mean == pytest.approx(float(np.mean(returns[-100:])))
    assert s.policy_version == 4
    assert (s.learner.iteration, s.learner.transitions_trained, s.learner.losses) == (3, 64, {"td": 1.5})
    assert s.learner.samples_per_insert == pytest.approx(64 / (2500 - 64))
    (buf,) = s.buffers
    assert (buf.buffer_id, buf.capacity_transitions) == (BUFFER_ID, 2000)
    assert buf.transitions == 2000 and buf.chunks == 4 and buf.evicted_chunks == 1
    assert buf.chunks + buf.evicted_chunks == s.chunks
    workers = {ws.worker_id: ws for ws in s.workers}
    assert set(workers) == {w, idle, lrn}
    assert (workers[w].kind, workers[w].task_id) == ("collector", t)
    assert (workers[idle].name, workers[idle].task_id) == ("idle-host", None)
    assert workers[idle].last_seen_seconds_ago == 12.0
    assert workers[lrn].last_seen_seconds_ago == 4.0  # renewed by its last call
    tasks = {ts.task_id: ts for ts in s.tasks}
    assert set(tasks) == {"learner-0", "evaluator-0", "collector-0"}
    assert (tasks["collector-0"].state, tasks["collector-0"].worker_id, tasks["collector-0"].claims) == (
        "claimed", w, 1)
    assert (tasks["evaluator-0"].state, tasks["evaluator-0"].worker_id) == ("pending", None)
    assert s.latest_evaluation is None and s.best_evaluation is None


def test_fresh_status(run: Run) -> None:
    s = run.status()
    assert (s.env_steps, s.episodes, s.chunks, s.policy_version, s.env_steps_per_second) == (0, 0, 0, 0, 0.0)
    assert s.recent_return_mean is None
    assert s.workers == []
    assert {ts.task_id for ts in s.tasks} == {"learner-0", "evaluator-0"}
    assert s.learner.samples_per_insert == 0.0
