"""Driving a coordinator.run.Run in-process, as its workers would: register, claim, report chunks, publish
policies and evaluations, on a fake clock. The Run fixtures built on these live in tests/coordinator/conftest.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlfleet.coordinator.run import Run
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import chunk_path, policy_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import sha256_hex
from rlfleet.shared.wire import (
    ChunkReport,
    CollectorTask,
    EpisodeStat,
    EvaluationReport,
    HoldoutReport,
    LearnerTask,
    PolicyPublish,
    PolicyRef,
    SampleResponse,
)
from tests.support.chunks import spread_ends

T0 = 1000.0


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def register(run: Run, kind: str, name: str = "host") -> str:
    return run.workers.register(kind, name).worker_id  # type: ignore[arg-type]


def collector(run: Run) -> tuple[str, str]:
    """Register a collector and claim its task: (worker_id, task_id)."""
    worker_id = register(run, "collector")
    task = run.workers.claim(worker_id).task
    assert isinstance(task, CollectorTask)
    return worker_id, task.task_id


def learner(run: Run) -> str:
    worker_id = register(run, "learner")
    assert isinstance(run.workers.claim(worker_id).task, LearnerTask)
    return worker_id


def rows(config: RunConfig) -> int:
    """Rows (env steps) of a full chunk under `config`: num_envs x chunk_steps."""
    return config.collector.num_envs * config.collector.chunk_steps


def chunk(
    run: Run,
    worker_id: str,
    task_id: str,
    chunk_id: str,
    env_steps: int | None = None,
    returns: Sequence[float] = (),
    payload: bytes | None = None,
    write: bool = True,
    **changes: Any,
) -> ChunkReport:
    """Write a payload into the run's store (as a collector does) and build the matching report.

    By default the report has the run config's layout: num_envs = collector.num_envs, env_steps = num_envs x
    collector.chunk_steps, one episode end per reported return and per env error. `changes` override any field
    (tests of refused reports pass layouts the config does not declare)."""
    data = payload if payload is not None else f"payload of {chunk_id}".encode()
    path = chunk_path(task_id, chunk_id)
    if write:
        run.ctx.store.put(path, data)
    steps = rows(run.ctx.config) if env_steps is None else env_steps
    episodes = [EpisodeStat(ret=r, length=10) for r in returns]
    fields: dict[str, Any] = dict(
        chunk_id=chunk_id, worker_id=worker_id, task_id=task_id, payload_path=path, sha256=sha256_hex(data),
        size_bytes=len(data), env_steps=steps, num_envs=run.ctx.config.collector.num_envs, episodes=episodes,
        policy_version=0,
    )
    fields.update(changes)
    if "ends" not in changes:
        fields["ends"] = spread_ends(fields["env_steps"], len(episodes) + fields.get("env_errors", 0))
    return ChunkReport(**fields)


def publish(run: Run, store: LocalStore, worker_id: str, version: int, content: bytes | None = None,
            iteration: int = 0) -> PolicyRef:
    data = content if content is not None else f"weights v{version}".encode()
    path = policy_path(version)
    store.put(path, data)
    ref = PolicyRef(version=version, path=path, sha256=sha256_hex(data))
    run.publishing.publish_policy(PolicyPublish(worker_id=worker_id, policy=ref, iteration=iteration))
    return ref


def settle_files(run: Run) -> None:
    """Wait until the payload and policy files whose removal was submitted so far are deleted."""
    run.ctx.flush()


def counters(run: Run) -> tuple[int, int, int, int, int, int]:
    s = run.status()
    return (s.env_steps, s.episodes, s.chunks, s.buffers[0].transitions, s.buffers[0].chunks,
            run.ctx.data.limiter.inserted)


def evaluate(run: Run, worker_id: str, version: int, returns: list[float]) -> Any:
    return run.evaluations.evaluate(EvaluationReport(worker_id=worker_id, policy_version=version, returns=returns,
                                         lengths=[max(1, int(r)) for r in returns]))


def holdout(run: Run, worker_id: str, version: int, returns: list[float], request_id: str | None = None) -> Any:
    return run.evaluations.test(HoldoutReport(worker_id=worker_id, policy_version=version, returns=returns,
                                  lengths=[max(1, int(r)) for r in returns], request_id=request_id))


def served_chunk_ids(resp: SampleResponse) -> list[str]:
    """The chunk of each item, in the order the items were served."""
    return [resp.chunks[k].chunk_id for k in resp.chunk_index]
