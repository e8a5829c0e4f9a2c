"""Policies going out: a learner publishes a version (announced to workers only once durable), and self-play
runs serve their opponent pool."""

from __future__ import annotations

import asyncio
import logging

from rlfleet.coordinator.errors import Conflict, Invalid, StoreUnavailableError
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.storage.protocol import StorePathError, StoreUnavailable
from rlfleet.shared.wire import Ack, OpponentPool, PolicyPublish, PolicyRef

log = logging.getLogger(__name__)


class Publishing:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def publish_policy(self, publish: PolicyPublish) -> Ack:
        """Publish a version and wait for it to be durable (tests and tools; the route uses `publish`)."""
        try:
            size = self.ctx.store.size(publish.policy.path)
        except StorePathError as exc:
            raise Invalid(str(exc)) from exc
        self._publish_sized(publish, size)
        self.ctx.journal.committer.drain()
        return Ack(directive=self.ctx.directive("learner"))

    async def publish(self, publish: PolicyPublish) -> Ack:
        try:
            size = await asyncio.to_thread(self.ctx.store.size, publish.policy.path)
        except StorePathError as exc:
            raise Invalid(str(exc)) from exc
        except StoreUnavailable as exc:
            raise StoreUnavailableError(f"{exc}; the policy was not published, publish it again") from exc
        self._publish_sized(publish, size)
        await self.ctx.settle()  # the version is announced on the loop before this returns: the reply names it
        return Ack(directive=self.ctx.directive("learner"))

    def _publish_sized(self, publish: PolicyPublish, size: int | None) -> None:
        """Waiting collectors learn of the version only once it is durable (they may act with it at once)."""
        ctx, policy = self.ctx, publish.policy
        if not policy.path.startswith("policies/"):
            raise Invalid("policy path must be under 'policies/'")
        if size is None:
            raise Invalid(f"policy file {policy.path!r} is not in the store; write it before publishing")
        ctx.fleet.worker(publish.worker_id, ctx.clock(), "learner")
        fresh, dropped = ctx.policies.publish(policy)
        if not fresh:
            return
        book = {p.version for p in ctx.policies.versions}
        dropped = [p for p in dropped if not ctx.judge.keeps(p.version)]  # their files outlive the book
        unpinned = ctx.opponents.unpinned(dropped, ctx.opponents.published(policy), book)
        ctx.telemetry.published(policy.version, ctx.clock())
        ctx.learner.published(publish.iteration)
        ctx.data.remove_stale(policy.version)
        announce = ctx.on_loop(lambda: self._durable(policy))

        def durable() -> None:
            ctx.payloads.delete(unpinned)
            announce()

        ctx.commit(after=durable)

    def _durable(self, policy: PolicyRef) -> None:
        self.ctx.policies.mark_committed(policy)
        self.ctx.policy_signal.fire()

    async def opponents_reply(self) -> OpponentPool:
        """The pool for collectors and the evaluator, each version's file checked first: one deleted behind the
        coordinator's back (it pins them) leaves the pool with an error in the log and a count in status,
        instead of sending every worker after a file that is gone."""
        ctx = self.ctx
        if not ctx.opponents.enabled:
            raise Conflict(f"run {ctx.config.name!r} does not use self-play (no self_play section in its config)")
        pool = list(ctx.opponents.pool)
        try:
            sizes = await asyncio.to_thread(lambda: [ctx.store.size(p.path) for p in pool])
        except StoreUnavailable as exc:
            raise StoreUnavailableError(f"{exc}; ask for the opponent pool again") from exc
        gone = [p for p, size in zip(pool, sizes, strict=True) if size is None]
        if gone:
            for p in gone:
                log.error("opponent pool: policy v%d (%s) is no longer in the store, though the pool pins it: "
                          "deleted outside rlfleet? It leaves the pool", p.version, p.path)
            ctx.opponents.forget(gone)
            ctx.commit()
            await ctx.settle()
        return ctx.opponents.reply(ctx.policies.committed)
