"""Workers joining and staying: register, heartbeat (and its long poll for a newer policy), claim a task."""

from __future__ import annotations

from rlfleet.coordinator.errors import Invalid
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.state.dataplane import BUFFER_ID
from rlfleet.coordinator.state.tasks import TaskRecord
from rlfleet.shared.envs.seeds import base_seed
from rlfleet.shared.loops import loop_of
from rlfleet.shared.wire import (
    ClaimResponse,
    CollectorTask,
    EvaluatorTask,
    HeartbeatResponse,
    LearnerTask,
    RegisterResponse,
    Task,
    WorkerKind,
)


class Workers:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        # A publish wakes every long poll at once: they share one serialised reply while nothing else changed.
        self._heartbeat_cache: tuple[object, bytes] = (None, b"")

    def register(self, kind: WorkerKind, name: str, restarts: int = 0, request_id: str | None = None,
                 last_error: str | None = None) -> RegisterResponse:
        ctx = self.ctx
        worker = ctx.fleet.register(kind, name, restarts, request_id, ctx.clock(), last_error)
        ctx.commit()
        lease = ctx.fleet.lease_seconds
        return RegisterResponse(worker_id=worker.worker_id, lease_seconds=lease, heartbeat_seconds=lease / 4,
                                max_wait_seconds=ctx.max_wait_seconds, run_name=ctx.config.name,
                                directive=ctx.directive(kind))

    def heartbeat(self, worker_id: str, scope: str = "admin") -> HeartbeatResponse:
        ctx = self.ctx
        worker = ctx.fleet.worker(worker_id, ctx.clock(), scope=scope)
        return HeartbeatResponse(lease_seconds=ctx.fleet.lease_seconds, directive=ctx.directive(worker.kind))

    async def heartbeat_reply(self, worker_id: str, scope: str, newer_than: int | None, wait: float,
                              while_paused: bool = False) -> bytes:
        """Renew the lease; with `newer_than`, hold the reply until a newer policy is durable; with `while_paused`,
        hold a collector's reply while collection is paused (at most `wait` either way).

        A paused collector waits its pause out here instead of re-checking every PAUSE_SECONDS: one request per
        `wait` instead of twenty a second, and the resume (the operator's, or the rate limiter letting
        collectors go) answers it at once."""
        ctx = self.ctx
        if newer_than is not None and while_paused:
            raise Invalid("pass newer_than or while_paused, not both: a collector waits for a new policy on its "
                          "heartbeat thread and waits out a pause on its collecting one")
        if newer_than is not None or while_paused:
            worker = ctx.fleet.worker(worker_id, ctx.clock(), scope=scope)  # unknown or foreign: refused first
            wait = min(wait, ctx.max_wait_seconds)
            if newer_than is not None:
                await ctx.wait_until(lambda: ctx.policies.committed_version > newer_than, ctx.policy_signal, wait)
            elif worker.kind == "collector":  # only collectors are told to pause
                await ctx.wait_until(lambda: not ctx.collection_paused, ctx.resume_signal, wait)
        reply = self.heartbeat(worker_id, scope)  # renews the lease again after the wait
        ctx.telemetry.policy_heard(newer_than, reply.directive.policy, ctx.clock())
        key = (reply.directive, reply.lease_seconds)
        if self._heartbeat_cache[0] != key:
            self._heartbeat_cache = (key, reply.model_dump_json().encode())
        return self._heartbeat_cache[1]

    def claim(self, worker_id: str, scope: str = "admin") -> ClaimResponse:
        ctx = self.ctx
        worker = ctx.fleet.worker(worker_id, ctx.clock(), scope=scope)
        directive = ctx.directive(worker.kind)
        if directive.run_state != "running":  # the run ended, or training did (its end-of-budget test runs)
            return ClaimResponse(task=None, directive=directive)
        task = ctx.fleet.claim(worker, ctx.clock())
        ctx.commit()
        return ClaimResponse(task=self.task_model(task) if task else None, directive=ctx.directive(worker.kind))

    def task_model(self, task: TaskRecord) -> Task:
        cfg, plan = self.ctx.config, self.ctx.plan
        seed = cfg.seed  # the learner seeds itself, the evaluator derives its blocks (shared/envs/seeds.py)
        if task.kind == "collector":  # a fresh block per claim: a restarted collector never repeats a sequence
            return CollectorTask(task_id=task.task_id, env=cfg.env, spaces=plan.spaces, behaviour=plan.behaviour,
                                 collector=cfg.collector, sampling=cfg.sampling,
                                 seed=base_seed(cfg.seed, "train", task.index, task.claims),
                                 policy=self.ctx.policies.committed, lockstep=cfg.deterministic,
                                 work=loop_of(plan.spec.loop).collector_work, self_play=cfg.self_play,
                                 max_body_bytes=self.ctx.max_body_bytes)
        if task.kind == "learner":
            return LearnerTask(task_id=task.task_id, buffer_id=BUFFER_ID, algo=cfg.algo, env=cfg.env,
                               spaces=plan.spaces, behaviour=plan.behaviour, learner=cfg.learner,
                               deterministic=cfg.deterministic, replay=cfg.replay,
                               sampling=cfg.sampling, collector=cfg.collector, seed=seed)
        return EvaluatorTask(task_id=task.task_id, env=cfg.env, spaces=plan.spaces, evaluation=cfg.evaluation,
                             seed=seed, self_play=cfg.self_play)
