"""Wire models of dataset serving: batches of a recorded dataset's train split, epoch by epoch.

A dataset run's learner asks the coordinator for each batch (coordinator/state/datasets.py owns the order): which
episode files, which rows of each. The files are read from the dataset store (shared/payloads/recordings.py), not
sent.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rlfleet.shared.wire.base import Count, Directive, Id, PayloadPath, RequestId, Sha256, Wire


class DatasetSampleRequest(Wire):
    worker_id: Id
    """The learner's id, issued by the coordinator at registration."""
    request_id: RequestId | None = None
    """Client-generated id of this request, kept across retries: a retry gets the same batch."""
    batch_size: Annotated[int, Field(ge=1, le=65_536, description="transitions wanted (the epoch's last batch may "
                                                                  "hold fewer)")]


class DatasetFile(Wire):
    path: PayloadPath
    """The episode file's path in the dataset store."""
    sha256: Sha256


class DatasetBatch(Wire):
    """Transition k of the batch is row rows[k] of files[file_index[k]] (rows = the episode's steps)."""

    dataset: str = Field(description="the dataset served")
    epoch: Count = Field(description="the epoch this batch belongs to, from 1; 0 once every epoch was served")
    epoch_complete: bool = Field(description="this batch ends its epoch: every train transition was served once")
    epochs: Count = Field(description="epochs the run trains (algo.epochs)")
    files: list[DatasetFile] = Field(description="the episode files the batch reads (each once)")
    file_index: list[int] = Field(description="per transition: its file's index in `files`")
    rows: list[int] = Field(description="per transition: its row in that file")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class EpochScore(Wire):
    epoch: Count = Field(description="the epoch, from 1")
    scores: dict[str, float] = Field(description="the learner's scores on the valid split after it (valid_nll, "
                                                 "valid_accuracy for discrete actions, valid_action_mse for Box)")


class DatasetStatus(Wire):
    name: str = Field(description="the dataset the run trains on")
    train_episodes: Count = Field(description="episodes in the train split")
    train_transitions: Count = Field(description="transitions in the train split")
    valid_episodes: Count = Field(description="episodes in the valid split")
    recorded_return_mean: float = Field(description="mean raw return of the recorded episodes (both splits)")
    epoch: Count = Field(description="the epoch being served, from 1 (past `epochs` once all were served)")
    epochs: Count = Field(description="epochs the run trains")
    batches_served: Count = Field(description="batches served so far")
    epoch_scores: list[EpochScore] = Field(description="the valid split's scores after each epoch trained so far")
