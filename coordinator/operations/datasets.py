"""Training on a recorded dataset (coordinator/state/datasets.py holds the order): the next batch, and the end
of training.

Like every reply, a batch is given once its position is durable. Once every epoch was served (the batch is
empty) the run waits for the evaluator's verdict on the last policy, validation and any test it earned, and
then ends (budget_exhausted) unless that verdict solved it; with no threshold, once the best policy's held-out
test has reported (coordinator/operations/budget.py).
"""

from __future__ import annotations

from typing import Protocol

from rlfleet.coordinator.errors import NotFound
from rlfleet.coordinator.operations.budget import training_over
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.state.datasets import DatasetServer
from rlfleet.shared.wire import DatasetBatch, DatasetSampleRequest


class ServerOwner(Protocol):
    """Who holds the run's current dataset server: the dataset workload (coordinator/workloads/dataset.py), which
    builds it anew when the run reloads its components from the journal."""

    server: DatasetServer


class DatasetFeed:
    """The dataset loop's operations, over the server its workload holds."""

    def __init__(self, ctx: RunContext, owner: ServerOwner) -> None:
        self.ctx = ctx
        self.owner = owner

    @property
    def server(self) -> DatasetServer:
        return self.owner.server

    async def sample(self, name: str, request: DatasetSampleRequest, scope: str) -> DatasetBatch:
        ctx, server = self.ctx, self.server
        if name != server.manifest.name:
            raise NotFound(f"dataset {name!r}: this run trains on {server.manifest.name!r}")
        ctx.fleet.worker(request.worker_id, ctx.clock(), "learner", scope)
        batch = server.next_batch(request.batch_size, request.request_id)
        ctx.commit()
        await ctx.settle()
        return DatasetBatch(dataset=name, epochs=server.epochs, directive=ctx.directive("learner"), **batch)

    def end_when_trained(self) -> None:
        """End a dataset run whose epochs were all served once the learner has reported the last one and the
        last published policy has been validated with no test under way (a run that publishes no policy: once
        the last epoch is reported)."""
        ctx = self.ctx
        server, judged = self.server, ctx.judge.latest
        if not server.done or not ctx.lifecycle.running or ctx.judge.under_test is not None:
            return
        if not server.scores or server.scores[-1].epoch < server.epochs:
            return  # the learner has not reported its last epoch yet (its policy is published before that)
        done = f"all {server.epochs} epochs over dataset {server.manifest.name!r} were trained"
        if ctx.policies.latest_version == 0:  # a learner of models, not policies: nothing to judge
            ctx.end("budget_exhausted", done)
        elif judged is not None and judged.policy_version >= ctx.policies.latest_version:
            training_over(ctx, f"{done}; the last policy, v{judged.policy_version}, validated at {judged.mean:.1f}")
            ctx.commit()
