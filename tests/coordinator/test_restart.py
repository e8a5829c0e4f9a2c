"""A restarted coordinator resumes exactly what it acknowledged: buffer, counters, policies, workers, tasks."""

from __future__ import annotations

from pathlib import Path

from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.run import Run
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import EvaluationReport, LearnReport, SampleRequest
from tests.support.configs import layout, make_config
from tests.support.run import FakeClock, chunk, collector, learner, publish, register, rows


def _reopen(path: Path, config: RunConfig, store: LocalStore, clock: FakeClock) -> Run:
    return Run(config, store, clock=clock, sample_wait_seconds=0, keep_policies=2, journal=Journal(path))


def _busy_config(run_config: RunConfig) -> RunConfig:
    return layout(run_config, chunk_steps=128)  # chunks of 2 envs x 128 steps = 256 rows


def _busy_run(path: Path, config: RunConfig, store: LocalStore, clock: FakeClock) -> Run:
    run = _reopen(path, config, store, clock)
    worker, task = collector(run)
    for i in range(12):  # capacity 2000 / 256 per chunk: the oldest chunks get evicted
        run.chunks.ingest(chunk(run, worker, task, f"c{i:02d}", returns=(float(i),)))
    learner_id = learner(run)
    run.learning.sample(SampleRequest(worker_id=learner_id, batch_size=32, num_batches=2))
    for version in (1, 2, 3):
        publish(run, store, learner_id, version, iteration=version * 10)
    evaluator = register(run, "evaluator")
    run.workers.claim(evaluator)
    run.evaluations.evaluate(EvaluationReport(worker_id=evaluator, policy_version=3,
                                              returns=[100.0, 120.0, 100.0, 120.0], lengths=[100, 120, 100, 120]))
    clock.advance(7.0)
    run.tick()
    return run


def test_restart_recovers_buffer_counters_policies_workers_and_tasks(
        tmp_path: Path, run_config: RunConfig, store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run_config = _busy_config(run_config)
    before = _busy_run(db, run_config, store, clock)
    status_before = before.status()
    entries_before = before.ctx.data.buffer.entries()
    policies_before = list(before.ctx.policies.versions)
    before.ctx.journal.close()  # the process dies here

    clock.advance(3.0)  # downtime does not count as run time
    after = _reopen(db, run_config, store, clock)
    status_after = after.status()
    assert after.ctx.data.buffer.entries() == entries_before  # ids, paths, hashes, sizes, versions, order
    assert list(after.ctx.policies.versions) == policies_before
    assert list(after.ctx.data.ledger._acked) == list(before.ctx.data.ledger._acked)
    assert (after.ctx.data.limiter.inserted, after.ctx.data.limiter.sampled) == (
        before.ctx.data.limiter.inserted, before.ctx.data.limiter.sampled)
    for field in ("env_steps", "episodes", "chunks", "duplicate_chunks", "policy_version", "recent_return_mean",
                  "latest_evaluation", "best_evaluation", "buffers", "run_state"):
        assert getattr(status_after, field) == getattr(status_before, field), field
    assert status_after.wall_seconds == status_before.wall_seconds
    assert {(w.worker_id, w.kind, w.task_id) for w in status_after.workers} == {
        (w.worker_id, w.kind, w.task_id) for w in status_before.workers}
    assert {(t.task_id, t.state, t.worker_id, t.claims) for t in status_after.tasks} == {
        (t.task_id, t.state, t.worker_id, t.claims) for t in status_before.tasks}


def test_after_restart_retries_are_duplicates_and_new_ids_never_collide(
        tmp_path: Path, run_config: RunConfig, store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run_config = _busy_config(run_config)
    before = _busy_run(db, run_config, store, clock)
    worker = next(w.worker_id for w in before.status().workers if w.kind == "collector")
    before.ctx.journal.close()

    after = _reopen(db, run_config, store, clock)
    steps = after.ctx.data.env_steps
    # A collector retrying its last report after the restart: acknowledged once, counted once.
    retry = chunk(after, worker, "collector-0", "c11", returns=(11.0,))
    assert after.chunks.ingest(retry).duplicate
    assert after.ctx.data.env_steps == steps
    # The worker's lease survived: it can heartbeat without registering again.
    assert after.workers.heartbeat(worker).directive.run_state == "running"
    # New workers and tasks get fresh ids.
    new_worker = register(after, "collector")
    assert new_worker not in {w.worker_id for w in before.status().workers}
    task = after.workers.claim(new_worker).task
    assert task is not None and task.task_id == "collector-1"


def test_ended_run_stays_ended_and_keeps_its_config(tmp_path: Path, run_config: RunConfig,
                                                   store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _reopen(db, run_config, store, clock)
    run.controls.stop("done for today")
    run.ctx.journal.close()
    changed = make_config(run_config, algo={"learning_rate": 0.5})
    after = _reopen(db, changed, store, clock)
    assert after.ctx.lifecycle.state == "stopped" and after.ctx.lifecycle.message == "done for today"
    assert after.ctx.config == run_config  # a resumed run keeps the config it started with


def test_env_errors_are_counted_and_survive_a_restart(tmp_path: Path, run_config: RunConfig,
                                                      store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _reopen(db, run_config, store, clock)
    worker, task = collector(run)
    run.chunks.ingest(chunk(run, worker, task, "e1", env_errors=2))
    assert run.status().env_errors == 2
    run.ctx.journal.close()
    assert _reopen(db, run_config, store, clock).status().env_errors == 2


def test_payload_bytes_per_env_step_are_reported_and_survive_a_restart(tmp_path: Path, run_config: RunConfig,
                                                                      store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _reopen(db, run_config, store, clock)
    assert run.status().payload_bytes_per_env_step is None  # no chunk yet
    worker, task = collector(run)
    steps = rows(run_config)
    run.chunks.ingest(chunk(run, worker, task, "b1", payload=b"x" * (3 * steps)))
    run.chunks.ingest(chunk(run, worker, task, "b2", payload=b"x" * (5 * steps)))
    assert run.status().payload_bytes_per_env_step == 4.0
    run.ctx.journal.close()
    assert _reopen(db, run_config, store, clock).status().payload_bytes_per_env_step == 4.0


def test_restarts_are_reported_in_status_and_survive_a_restart(tmp_path: Path, run_config: RunConfig,
                                                               store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _reopen(db, run_config, store, clock)
    restarted = run.workers.register("learner", "learner", restarts=2).worker_id
    assert run.status().coordinator_resumes == 0
    run.ctx.journal.close()
    after = _reopen(db, run_config, store, clock)
    assert after.status().coordinator_resumes == 1
    assert [w.restarts for w in after.status().workers if w.worker_id == restarted] == [2]
    after.ctx.journal.close()
    assert _reopen(db, run_config, store, clock).status().coordinator_resumes == 2


def test_failed_hooks_survive_a_restart_and_older_journals_load_without_them(tmp_path: Path, run_config: RunConfig,
                                                                             store: LocalStore) -> None:
    clock = FakeClock()
    db = tmp_path / "coordinator.sqlite"
    run = _reopen(db, run_config, store, clock)
    failed = {"tests.support.hooks:boom@publish": "at iteration 1: ValueError: boom"}
    run.learning.learn_report(LearnReport(worker_id=learner(run), iteration=1, transitions_trained=32,
                                          hooks_failed=failed))
    run.ctx.journal.close()
    after = _reopen(db, run_config, store, clock)
    assert after.status().learner.hooks_failed == failed
    state = after.ctx.learner.state_dict()
    del state["hooks_failed"]  # what a coordinator of an earlier release journalled
    after.ctx.learner.load_state_dict(Stored(state), now=0.0)
    assert after.status().learner.hooks_failed == {} and after.status().learner.iteration == 1


def test_a_stopped_run_reopened_is_told_to_workers_as_running_once_durable(tmp_path: Path, run_config: RunConfig,
                                                                            store: LocalStore) -> None:
    db, clock = tmp_path / "journal.db", FakeClock()
    run = _reopen(db, run_config, store, clock)
    run.controls.stop("operator")
    run.ctx.close()
    run.ctx.journal.close()
    again = Run(run_config, store, clock=clock, sample_wait_seconds=0, journal=Journal(db), reopen_stopped=True)
    assert again.ctx.lifecycle.state == "running"
    again.ctx.flush()  # the coordinator waits for this before serving (coordinator/main.py)
    worker = register(again, "collector")
    assert again.workers.heartbeat(worker).directive.run_state == "running"
    again.ctx.close()


def test_an_exhausted_run_resumed_with_a_larger_budget_trains_on_and_keeps_it(tmp_path: Path, run_config: RunConfig,
                                                                               store: LocalStore) -> None:
    """`rlfleet up --resume NAME --set budget.max_env_steps=...` (the coordinator's `budget`): the run that ran out
    trains on, its workers are told so once durable, and a later plain restart keeps the larger budget. Resumed
    with no budget, or its own, it stays ended."""
    db, clock = tmp_path / "journal.db", FakeClock()
    small = make_config(_busy_config(run_config), budget={"max_env_steps": 256})
    run = _reopen(db, small, store, clock)
    worker, task = collector(run)
    run.chunks.ingest(chunk(run, worker, task, "c0"))  # 2 envs x 128 steps: the budget is used up
    run.tick()
    assert run.ctx.lifecycle.state == "budget_exhausted"
    run.ctx.close()
    run.ctx.journal.close()
    for budget in (None, small.budget):
        same = Run(small, store, clock=clock, sample_wait_seconds=0, journal=Journal(db), budget=budget)
        assert same.ctx.lifecycle.state == "budget_exhausted" and same.ctx.config.budget == small.budget
        same.ctx.close()
        same.ctx.journal.close()
    larger = make_config(small, budget={"max_env_steps": 1_024})
    again = Run(larger, store, clock=clock, sample_wait_seconds=0, journal=Journal(db), budget=larger.budget)
    assert again.ctx.lifecycle.state == "running" and again.ctx.lifecycle.training
    assert again.ctx.config.budget.max_env_steps == 1_024 and again.ctx.data.env_steps == 256
    again.ctx.flush()
    listener = register(again, "collector")
    assert again.workers.heartbeat(listener).directive.run_state == "running"
    again.ctx.close()
    again.ctx.journal.close()
    later = Run(small, store, clock=clock, sample_wait_seconds=0, journal=Journal(db))  # a plain restart
    assert later.ctx.config.budget.max_env_steps == 1_024 and later.ctx.lifecycle.state == "running"
    later.ctx.close()
