"""The population loop: the learner of a population-based algorithm (evolution strategies) as the master.

Each turn: publish the current policy (the version the generation perturbs; also the first one), open a
generation of its members in the coordinator, wait (long polls) until `min_fraction` of them have reported or
`generation_timeout_seconds` passed, then update from the results. No buffer, no payloads: collectors send
returns. Learn info per generation: population returns, fraction received, late results so far, and the
seconds from opening the generation to its results (what more collectors shorten).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Protocol

from rlfleet.learner_worker.algorithms import Learner
from rlfleet.learner_worker.trainer import Trainer, check_finite
from rlfleet.shared.algorithms.base import PopulationParams
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import (
    GenerationClose,
    GenerationOpen,
    GenerationOpened,
    GenerationResults,
    LearnerTask,
    MemberSpec,
    Perturbation,
)
from rlfleet.shared.worker.session import WorkerSession


class PopulationLearner(Learner, Protocol):
    def members(self) -> list[MemberSpec]: ...
    def perturbation(self) -> Perturbation: ...


class PopulationTrainer(Trainer):
    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        super().__init__(session, layout, task)
        if not isinstance(task.algo, PopulationParams):
            raise TypeError(f"{task.algo.name} parameters are not a population loop's")
        self.params = task.algo
        self.population_learner: PopulationLearner = self.learner  # type: ignore[assignment]

    def io_summary(self) -> str:
        return f"{self.iteration} generations"

    def loop(self, running: Callable[[], bool]) -> None:
        while running():
            self.publish()
            opened = time.monotonic()
            generation = self.open()
            results = self.await_results(generation, running)
            if results is None:
                return  # the run ended while the generation was out
            losses = self.update(results.results)
            check_finite(self.iteration + 1, losses)
            losses |= {"generation": float(generation), "fraction_received": results.received / results.population,
                       "late_results": float(results.late_results),
                       "generation_seconds": time.monotonic() - opened}
            self.after_update(losses, sum(1 for _ in results.results), publish=False)

    def open(self) -> int:
        learner = self.population_learner
        request = GenerationOpen(worker_id=self.session.worker_id, request_id=uuid.uuid4().hex,
                                 policy_version=self.version, perturbation=learner.perturbation(),
                                 members=learner.members())
        reply = self.session.client.call("POST", "/v1/generations", GenerationOpened, request)
        self.session.update(reply.directive)
        return reply.generation

    def await_results(self, generation: int, running: Callable[[], bool]) -> GenerationResults | None:
        """Long-poll the close until min_fraction reported; past the timeout, close with what arrived."""
        deadline = time.monotonic() + self.params.generation_timeout_seconds
        while running():
            remaining = deadline - time.monotonic()
            reply = self.session.client.call("POST", f"/v1/generations/{generation}/close", GenerationResults,
                                             GenerationClose(worker_id=self.session.worker_id,
                                                             min_fraction=self.params.min_fraction,
                                                             wait_seconds=self.session.long_poll_wait(remaining),
                                                             force=remaining <= 0))
            self.session.update(reply.directive)
            if reply.closed:
                return reply
        return None
