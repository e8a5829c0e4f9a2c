"""Which seeds each mode used: collector claims get fresh train blocks, evaluations and tests report theirs."""

from __future__ import annotations

from rlfleet.coordinator.run import Run
from rlfleet.shared.envs.seeds import COLLECTOR_TASKS, base_seed, decode
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import CollectorTask, EvaluationReport, HoldoutReport
from tests.support.run import FakeClock, learner, publish, register


def test_every_claim_gets_its_own_train_block_and_status_lists_all_modes(
        run: Run, store: LocalStore, clock: FakeClock) -> None:
    a, b = register(run, "collector"), register(run, "collector")
    task_a, task_b = run.workers.claim(a).task, run.workers.claim(b).task
    assert isinstance(task_a, CollectorTask) and isinstance(task_b, CollectorTask)
    seed = run.ctx.config.seed
    assert decode(seed, task_a.seed) == ("train", 0, 1) and decode(seed, task_b.seed)[1:] == (1, 1)
    clock.advance(run.ctx.fleet.lease_seconds + 1)
    run.tick()  # a's lease expires: its task goes back to the queue
    c = register(run, "collector")
    again = run.workers.claim(c).task
    assert isinstance(again, CollectorTask) and again.task_id == task_a.task_id
    assert decode(seed, again.seed)[1:] == (0, 2)  # the same task, a fresh block: never an earlier sequence
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    publish(run, store, learner(run), 1)
    valid = base_seed(run.ctx.config.seed, "valid", 0, 1)
    run.evaluations.evaluate(EvaluationReport(worker_id=ev, policy_version=1, returns=[480.0] * 4, lengths=[480] * 4,
                                              seed=valid))
    test = base_seed(run.ctx.config.seed, "test", 0, 1)
    run.evaluations.test(HoldoutReport(worker_id=ev, policy_version=1, returns=[480.0] * 100, lengths=[480] * 100,
                                       seed=test))
    seeds = run.status().seeds
    assert seeds is not None
    assert set(seeds.train) >= {task_a.seed, again.seed} and seeds.valid == [valid] and seeds.test == [test]
    assert seeds.envs == {"train": 2, "valid": 2, "test": 10}


def test_no_collector_task_is_created_past_the_seed_schemes_blocks(run: Run) -> None:
    """A collector beyond COLLECTOR_TASKS at once waits for a free task, as any collector does: its seeds would be
    outside the 32-bit scheme (a claim that failed with a server error instead)."""
    tasks = [run.workers.claim(register(run, "collector")).task for _ in range(COLLECTOR_TASKS)]
    assert all(isinstance(task, CollectorTask) for task in tasks)
    assert run.workers.claim(register(run, "collector")).task is None
