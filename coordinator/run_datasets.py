"""The run's operations on its recorded dataset (coordinator/datasets.py holds the order): the next batch, and
the end of training.

Like every reply, a batch is given once its position is durable. Once every epoch was served (the batch is
empty) the run waits for the evaluator's verdict on the last policy, validation and any test it earned, and
then ends (budget_exhausted) unless that verdict solved it.
"""

from __future__ import annotations

from coordinator.errors import Conflict, NotFound
from coordinator.run_generations import RunGenerations
from shared.wire import DatasetBatch, DatasetSampleRequest


class RunDatasets(RunGenerations):
    async def sample_dataset(self, name: str, request: DatasetSampleRequest, scope: str) -> DatasetBatch:
        server = self.dataset
        if server is None:
            raise Conflict(f"this run's algorithm ({self.plan.spec.name}) does not train on a recorded dataset")
        if name != server.manifest.name:
            raise NotFound(f"dataset {name!r}: this run trains on {server.manifest.name!r}")
        self.fleet.worker(request.worker_id, self.clock(), "learner", scope)
        batch = server.next_batch(request.batch_size, request.request_id)
        self._commit([], "dataset")
        await self.settle()
        return DatasetBatch(dataset=name, epochs=server.epochs, directive=self.directive("learner"), **batch)

    def tick(self) -> None:
        super().tick()
        self.end_trained_dataset()

    def end_trained_dataset(self) -> None:
        """End a dataset run whose epochs were all served once the learner has reported the last one and the
        last published policy has been validated with no test under way (a run that publishes no policy: once
        the last epoch is reported)."""
        server, judged = self.dataset, self.judge.latest
        if server is None or not server.done or not self.lifecycle.running or self.judge.pending is not None:
            return
        if not server.scores or server.scores[-1].epoch < server.epochs:
            return  # the learner has not reported its last epoch yet (its policy is published before that)
        done = f"all {server.epochs} epochs over dataset {server.manifest.name!r} were trained"
        if self.policies.latest_version == 0:  # a learner of models, not policies: nothing to judge
            self.end("budget_exhausted", done)
        elif judged is not None and judged.policy_version >= self.policies.latest_version:
            self.end("budget_exhausted", f"{done}; the last policy, v{judged.policy_version}, validated at "
                     f"{judged.mean:.1f}")
