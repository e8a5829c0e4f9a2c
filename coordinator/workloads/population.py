"""The population loop's workload: the generations (coordinator/state/generations.py), the operations on them
that its routes call (coordinator/operations/generations.py), its status section and counters, and waking the
collectors that wait for a member when one's lease runs out."""

from __future__ import annotations

from typing import ClassVar

from rlfleet.coordinator.journal.component import Component
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.operations.generations import Population
from rlfleet.coordinator.operations.workload import StatusSections
from rlfleet.coordinator.state.generations import Generations
from rlfleet.shared.envs.seeds import population_seed
from rlfleet.shared.wire import LearnReport


class PopulationWorkload:
    counters: ClassVar[tuple[tuple[str, str], ...]] = (
        ("rlfleet_member_results", "population member results applied to their generation"),
        ("rlfleet_member_results_late", "member results for closed generations: acknowledged, never applied"),
        ("rlfleet_member_results_duplicate", "repeated member reports recognised and counted once"),
        ("rlfleet_members_reoffered", "population members offered again after their lease ran out"),
        ("rlfleet_generations_closed", "generations a population-based learner closed"))

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.generations: Generations  # by build(), which the run calls before anything else
        self.operations = Population(ctx, self)

    def build(self) -> tuple[Component, ...]:
        self.generations = Generations()
        return (self.generations,)

    def tick(self) -> None:
        ctx = self.ctx
        if ctx.generation_signal.waiters and self.generations.claimable(ctx.clock()):
            ctx.generation_signal.fire()  # a member's lease ran out: waiting collectors may take it

    def learned(self, report: LearnReport) -> None:
        pass

    def status(self, now: float) -> StatusSections:
        return {"population": self.generations.status(now)}

    def train_seeds(self) -> list[int]:
        """Population collectors play their generations' seeds only."""
        seed = self.ctx.config.seed
        return [population_seed(seed, g) for g in range(1, self.generations.last_number + 1)]

    def counts(self) -> dict[str, int]:
        g = self.generations
        values = (g.results_accepted, g.late_results, g.duplicate_results, g.members_reoffered, g.generations_closed)
        return {name: value for (name, _), value in zip(self.counters, values, strict=True)}
