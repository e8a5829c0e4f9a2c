"""The run's recorded dataset: batches of its train split, epoch by epoch (a dataset run's learner)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import LearnerScope, loop_operations
from rlfleet.coordinator.operations.datasets import DatasetFeed
from rlfleet.shared.payloads.recordings import NAME_PATTERN
from rlfleet.shared.wire import DatasetBatch, DatasetSampleRequest

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])
DatasetName = Annotated[str, Path(pattern=f"^{NAME_PATTERN}$", examples=["cartpole-expert"],
                                  description="the dataset's name (algo.dataset)")]
Feed = Annotated[DatasetFeed, Depends(loop_operations(
    DatasetFeed, "this run's algorithm ({algorithm}) does not train on a recorded dataset"))]


@router.post("/{name}/sample", response_model=DatasetBatch, summary="The next batch of the dataset's train split",
             **route_doc("learner", "The next `batch_size` transitions of the current epoch's order: every train "
                         "transition once per epoch, in an order drawn per epoch from the run seed. "
                         "`epoch_complete` marks an epoch's last batch (it may hold fewer). Read the rows from the "
                         "dataset store's files (sha256-checked). Keep `request_id` across retries: a retry gets "
                         "the same batch. After the last epoch the batch is empty and the run ends "
                         "(budget_exhausted). `not_found` for another dataset than the run's; `conflict` in a run "
                         "that does not train on a dataset.",
                         ("unknown_worker", "not_found", "conflict", *BODY, "journal_unavailable"),
                         ex.DATASET_SAMPLE, ex.DATASET_BATCH))
async def sample_dataset(name: DatasetName, body: DatasetSampleRequest, scope: LearnerScope,
                         feed: Feed) -> DatasetBatch:
    return await feed.sample(name, body, scope)
