"""The learner's side of the data: draws (waiting, without a thread, until one can be served), priority updates,
and learn reports."""

from __future__ import annotations

import numpy as np

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.wire import Ack, LearnReport, PriorityAck, PriorityUpdate, SampleRequest, SampleResponse


class Learning:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def sample(self, request: SampleRequest) -> SampleResponse:
        """Draw now (no waiting); a retry of the learner's last request id gets that same reply."""
        return SampleResponse.model_validate_json(self._draw(request))

    def _draw(self, request: SampleRequest) -> str:
        """The reply as JSON, serialised once: journalled for retries and sent as it is."""
        ctx = self.ctx
        worker = ctx.fleet.worker(request.worker_id, ctx.clock(), "learner")
        if worker.task_id is None:
            raise Conflict(f"worker {request.worker_id!r} holds no learner task; claim one first")
        retried = ctx.data.retried(worker.worker_id, request.request_id)
        if retried is not None:
            return retried
        drawn = ctx.data.sample(request, ctx.policies.latest_version)
        # Files of chunks the draw used up outlive it by a grace period (the learner is about to read them), which
        # starts once the draw is durable: a draw whose commit fails is undone, and its files stay.
        durable = ctx.payloads.consumed(ctx.clock(), [e.payload_path for e in drawn.gone])
        body = ctx.data.response(drawn, request.batch_size, ctx.directive("learner")).model_dump_json()
        ctx.data.remember_reply(worker.worker_id, request.request_id, body)
        ctx.commit(after=durable)
        return body

    async def sample_waiting(self, request: SampleRequest) -> str:
        """Wait (without a thread) until the draw can be served, up to the configured wait, then draw; the
        reply's JSON, ready to send.

        Where a full batch is more than the least a draw may take (a queue between min_batch_size and
        max_batch_size), the wait for the rest starts when that least is there, not when the request came: a
        learner asks again as soon as a wait ends empty, so a wait timed from the request could end between two
        collectors' chunks of one round, a few milliseconds apart, and draw one; with force_sync the other was then
        made stale by the policy trained without it, and dropped."""
        ctx = self.ctx
        _, _, needed, hoped = ctx.data.sample_size(request)
        limit = min(ctx.config.sampling.max_wait_seconds, ctx.sample_wait_seconds)

        def full() -> bool:
            return ctx.data.retried(request.worker_id, request.request_id) is not None or ctx.data.servable(hoped)

        waited = await ctx.wait_until(lambda: full() or ctx.data.servable(needed), ctx.data_signal, limit)
        if not full() and ctx.data.servable(needed):
            waited += await ctx.wait_until(full, ctx.data_signal, limit)
        ctx.telemetry.sample_wait.observe(waited)
        return await ctx.settled(self._draw(request))

    def update_priorities(self, update: PriorityUpdate) -> PriorityAck:
        ctx = self.ctx
        if len(update.ids) != len(update.priorities):
            raise Invalid(f"{len(update.ids)} ids but {len(update.priorities)} priorities; they must pair up")
        ctx.data.check_priorities_apply()
        ctx.fleet.worker(update.worker_id, ctx.clock(), "learner")
        updated = ctx.data.update_priorities(np.asarray(update.ids, np.int64),
                                             np.asarray(update.priorities, np.float64))
        ctx.commit()
        return PriorityAck(updated=updated, ignored=len(update.ids) - updated, directive=ctx.directive("learner"))

    def learn_report(self, report: LearnReport) -> Ack:
        ctx = self.ctx
        ctx.fleet.worker(report.worker_id, ctx.clock(), "learner")
        ctx.learner.report(report)
        ctx.workload.learned(report)
        ctx.commit()
        return Ack(directive=ctx.directive("learner"))
