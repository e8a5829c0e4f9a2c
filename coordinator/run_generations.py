"""The run's operations on generations of a population-based learner (coordinator/generations.py holds the rules).

Each operation checks the worker, changes the component, submits its state (with the data plane's counters and
the lifecycle when env steps were spent) and settles before replying: an acknowledged result is durable. Waits
(a collector for a member, the learner for results) hold no thread: they wait on the run's generation signal.
"""

from __future__ import annotations

from functools import cached_property

from coordinator.errors import Conflict, Invalid
from coordinator.run_control import RunControl
from shared.envs.seeds import population_seed
from shared.policy.flat_params import parameter_count, policy_shapes
from shared.policy.manifest import PolicyManifest, default_encoder
from shared.wire import (
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


class RunGenerations(RunControl):
    def _population(self, what: str) -> None:
        if self.plan.spec.loop != "population":
            raise Conflict(f"cannot {what}: this run's algorithm ({self.plan.spec.name}) trains from chunks, not "
                           "from generations of perturbed policies")

    @cached_property
    def policy_parameters(self) -> int:
        """Parameters of the policy being trained: a member's noise offset must leave room for all of them."""
        plan = self.plan
        manifest = PolicyManifest(spaces=plan.spaces, encoder=default_encoder(plan.spaces.obs),
                                  net=self.config.algo.net, head=plan.behaviour.head)
        return parameter_count(policy_shapes(manifest))

    async def open_generation(self, request: GenerationOpen, scope: str) -> GenerationOpened:
        self._population("open a generation")
        worker = self.fleet.worker(request.worker_id, self.clock(), "learner", scope)
        if worker.task_id is None:
            raise Conflict(f"worker {request.worker_id!r} holds no learner task; claim one first")
        offsets = request.perturbation.noise_size - self.policy_parameters + 1
        bad = next((i for i, m in enumerate(request.members) if m.noise_index >= offsets), None)
        if bad is not None:
            raise Invalid(f"members[{bad}].noise_index {request.members[bad].noise_index} leaves no room for the "
                          f"policy's {self.policy_parameters} parameters in a noise table of "
                          f"{request.perturbation.noise_size}")
        generation = self.generations.open(request, self.policies.committed,
                                           lambda number: population_seed(self.config.seed, number))
        self._commit([], "generations", after=self.on_loop(self.generation_signal.fire))
        await self.settle()
        return GenerationOpened(generation=generation.number, population=len(generation.members),
                                directive=self.directive("learner"))

    async def claim_member(self, request: MemberClaimRequest, scope: str) -> MemberClaim:
        """The next member to evaluate, waiting up to `wait_seconds` for one (a member whose lease ran out, or
        the next generation)."""
        self._population("claim a member")
        self.fleet.worker(request.worker_id, self.clock(), "collector", scope)
        await self.wait_until(lambda: self.generations.claimable(self.clock()), self.generation_signal,
                              min(request.wait_seconds, self.max_wait_seconds))
        self.fleet.worker(request.worker_id, self.clock(), "collector", scope)  # renewed after the wait
        claimed = self.generations.claim(request.worker_id, self.clock()) if self.lifecycle.running else None
        member = None
        if claimed is not None:
            generation, index = claimed
            spec = generation.members[index]
            member = MemberTask(generation=generation.number, member=index, policy=generation.policy,
                                perturbation=generation.perturbation, noise_index=spec.noise_index, sign=spec.sign,
                                seed=generation.seed)
        await self.settle()  # the generation it names is durable
        return MemberClaim(member=member, directive=self.directive("collector"))

    async def report_member(self, number: int, result: MemberResult, scope: str) -> ResultAck:
        """Take a member's result once; a late one is acknowledged and counted, its env steps spent all the same."""
        self._population("report a member")
        self.fleet.worker(result.worker_id, self.clock(), "collector", scope)
        verdict = self.generations.report(number, result)
        parts = ["generations"]
        if verdict != "duplicate":
            self.data.count_rollouts(result.env_steps, result.episodes, result.mean_return)
            self.lifecycle.check_budget(self.data.env_steps, self.clock())
            parts += ["data", "lifecycle"]
        self._commit([], *parts)
        if verdict == "accepted":
            self.generation_signal.fire()  # the learner's close re-checks; its reply settles after this commit
        elif not self.lifecycle.running:
            self.policy_signal.fire()
        await self.settle()
        return ResultAck(accepted=verdict == "accepted", duplicate=verdict == "duplicate", late=verdict == "late",
                         directive=self.directive("collector"))

    async def close_generation(self, number: int, request: GenerationClose, scope: str) -> GenerationResults:
        """Wait up to `wait_seconds` for `min_fraction` of the results, then close the generation (or say that it
        is still open); a retried close gets the same results."""
        self._population("close a generation")
        self.fleet.worker(request.worker_id, self.clock(), "learner", scope)
        self.generations.find(number)  # refuses a number never issued before waiting
        await self.wait_until(lambda: self.generations.ready(number, request.min_fraction), self.generation_signal,
                              min(request.wait_seconds, self.max_wait_seconds))
        was_open = self.generations.current is not None and self.generations.current.number == number
        generation = self.generations.close(number, request.min_fraction, request.force)
        if generation is not None and was_open:
            self._commit([], "generations")
        await self.settle()
        shown = generation or self.generations.current
        assert shown is not None  # find() and close() refused everything else
        return GenerationResults(generation=number, closed=generation is not None, population=len(shown.members),
                                 received=len(shown.results),
                                 results=sorted(generation.results.values(), key=lambda r: r.member)
                                 if generation is not None else [],
                                 late_results=self.generations.late_results, directive=self.directive("learner"))
