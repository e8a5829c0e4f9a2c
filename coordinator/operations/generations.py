"""Generations of a population-based learner (coordinator/state/generations.py holds the rules): the learner
opens one and closes it, collectors claim members and report their results.

Each operation checks the worker, changes the components, commits and settles before replying: an acknowledged
result is durable. Waits (a collector for a member, the learner for results) hold no thread: they wait on the
run's generation signal.
"""

from __future__ import annotations

from functools import cached_property
from typing import Protocol

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.operations.budget import check_budget
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.state.generations import Generations
from rlfleet.shared.envs.seeds import population_seed
from rlfleet.shared.policy.flat_params import parameter_count, policy_shapes
from rlfleet.shared.policy.manifest import PolicyManifest
from rlfleet.shared.wire import (
    GenerationClose,
    GenerationOpen,
    GenerationOpened,
    GenerationResults,
    MemberClaim,
    MemberClaimRequest,
    MemberResult,
    MemberTask,
    ResultAck,
)


class GenerationsOwner(Protocol):
    """Who holds the run's current generations: the population workload (coordinator/workloads/population.py),
    which builds them anew when the run reloads its components from the journal."""

    generations: Generations


class Population:
    """The population loop's operations, over the generations its workload holds."""

    def __init__(self, ctx: RunContext, owner: GenerationsOwner) -> None:
        self.ctx = ctx
        self.owner = owner

    @property
    def generations(self) -> Generations:
        return self.owner.generations

    @cached_property
    def policy_parameters(self) -> int:
        """Parameters of the policy being trained: a member's noise offset must leave room for all of them."""
        ctx = self.ctx
        plan = ctx.plan
        manifest = PolicyManifest.of(plan.spaces, ctx.config.algo.net, plan.behaviour.head)
        return parameter_count(policy_shapes(manifest))

    async def open_generation(self, request: GenerationOpen, scope: str) -> GenerationOpened:
        ctx = self.ctx
        worker = ctx.fleet.worker(request.worker_id, ctx.clock(), "learner", scope)
        if worker.task_id is None:
            raise Conflict(f"worker {request.worker_id!r} holds no learner task; claim one first")
        offsets = request.perturbation.noise_size - self.policy_parameters + 1
        bad = next((i for i, m in enumerate(request.members) if m.noise_index >= offsets), None)
        if bad is not None:
            raise Invalid(f"members[{bad}].noise_index {request.members[bad].noise_index} leaves no room for the "
                          f"policy's {self.policy_parameters} parameters in a noise table of "
                          f"{request.perturbation.noise_size}")
        generation = self.generations.open(request, ctx.policies.committed,
                                           lambda number: population_seed(ctx.config.seed, number))
        ctx.commit(after=ctx.on_loop(ctx.generation_signal.fire))
        await ctx.settle()
        return GenerationOpened(generation=generation.number, population=len(generation.members),
                                directive=ctx.directive("learner"))

    async def claim_member(self, request: MemberClaimRequest, scope: str) -> MemberClaim:
        """The next member to evaluate, waiting up to `wait_seconds` for one (a member whose lease ran out, or
        the next generation)."""
        ctx = self.ctx
        ctx.fleet.worker(request.worker_id, ctx.clock(), "collector", scope)
        await ctx.wait_until(lambda: self.generations.claimable(ctx.clock()), ctx.generation_signal,
                             min(request.wait_seconds, ctx.max_wait_seconds))
        ctx.fleet.worker(request.worker_id, ctx.clock(), "collector", scope)  # renewed after the wait
        claimed = self.generations.claim(request.worker_id, ctx.clock()) if ctx.lifecycle.running else None
        member = None
        if claimed is not None:
            generation, index = claimed
            spec = generation.members[index]
            member = MemberTask(generation=generation.number, member=index, policy=generation.policy,
                                perturbation=generation.perturbation, noise_index=spec.noise_index, sign=spec.sign,
                                seed=generation.seed)
            ctx.commit()  # who holds the member: only its result is taken
        await ctx.settle()  # the generation it names, and the claim, are durable
        return MemberClaim(member=member, directive=ctx.directive("collector"))

    async def report_member(self, number: int, result: MemberResult, scope: str) -> ResultAck:
        """Take a member's result once, from its claimant; a late one is acknowledged and counted once, its env
        steps spent all the same."""
        ctx = self.ctx
        ctx.fleet.worker(result.worker_id, ctx.clock(), "collector", scope)
        verdict = self.generations.report(number, result)
        if verdict != "duplicate":
            ctx.data.count_rollouts(result.env_steps, result.episodes, result.mean_return)
            check_budget(ctx)
        ctx.commit()
        if verdict == "accepted":
            ctx.generation_signal.fire()  # the learner's close re-checks; its reply settles after this commit
        await ctx.settle()
        return ResultAck(accepted=verdict == "accepted", duplicate=verdict == "duplicate", late=verdict == "late",
                         directive=ctx.directive("collector"))

    async def close_generation(self, number: int, request: GenerationClose, scope: str) -> GenerationResults:
        """Wait up to `wait_seconds` for `min_fraction` of the results, then close the generation (or say that it
        is still open); a retried close gets the same results."""
        ctx = self.ctx
        ctx.fleet.worker(request.worker_id, ctx.clock(), "learner", scope)
        self.generations.find(number)  # refuses a number never issued before waiting
        await ctx.wait_until(lambda: self.generations.ready(number, request.min_fraction), ctx.generation_signal,
                             min(request.wait_seconds, ctx.max_wait_seconds))
        generation = self.generations.close(number, request.min_fraction, request.force)
        ctx.commit()
        await ctx.settle()
        shown = generation or self.generations.current
        assert shown is not None  # find() and close() refused everything else
        return GenerationResults(generation=number, closed=generation is not None, population=len(shown.members),
                                 received=len(shown.results),
                                 results=sorted(generation.results.values(), key=lambda r: r.member)
                                 if generation is not None else [],
                                 late_results=self.generations.late_results, directive=ctx.directive("learner"))
