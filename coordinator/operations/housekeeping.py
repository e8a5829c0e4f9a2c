"""What the coordinator does on its own clock (every `tick_seconds`): expire leases (returning their tasks),
enforce the budgets, sample the env-step rate, release consumed payloads past their grace, forget chunk ids past
the idempotency window, and compact the buffer's replay log."""

from __future__ import annotations

from rlfleet.coordinator.operations.budget import check_budget
from rlfleet.coordinator.operations.context import RunContext


class Housekeeping:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._rate: list[tuple[float, int]] = []  # (time, env steps) of the last ticks

    def tick(self) -> None:
        ctx = self.ctx
        now = ctx.clock()
        ctx.data.forget_replies(ctx.fleet.expire(now))
        check_budget(ctx)
        self._rate = [*self._rate[-15:], (now, ctx.data.env_steps)]
        ctx.payloads.expire_consumed(now)
        ctx.data.expire_ids(ctx.wall_clock())
        ctx.data.compact()
        ctx.commit()

    def steps_per_second(self) -> float:
        if len(self._rate) >= 2 and self._rate[-1][0] > self._rate[0][0]:
            (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
            return (s1 - s0) / (t1 - t0)
        return 0.0

    def referenced_payloads(self) -> set[str]:
        """Payload files the run still needs: chunks in the buffer and consumed ones within their grace."""
        ctx = self.ctx
        return {e.payload_path for e in ctx.data.buffer.entries()} | ctx.payloads.in_grace()
