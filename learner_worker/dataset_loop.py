"""The dataset loop: a learner trained on a recorded dataset (behavioural cloning, models of experience) instead
of on collectors.

Each turn it asks the coordinator for the next batch of the train split (coordinator/state/datasets.py owns the
epochs and their order), reads the learner's columns from the dataset store's episode files (sha256-checked,
kept in memory: a recording is read many times over), and takes one gradient step. At each epoch's end it
scores the valid split (`valid_*` in learn info, kept in every later report, so status always shows the latest
epoch's) and, for a policy learner, publishes, so the evaluator judges every epoch's policy in the env (and
every `publish_every` updates in between); a model that is not a policy is saved instead
(`models/epoch-NNNNNN.safetensors` in the run's store, the lowest valid loss as `best/model.safetensors` with
`best/model.json`). Once the coordinator has served every epoch the learner waits for the run's end: the
coordinator ends it when the evaluator has judged the last policy (at once when there is none).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

import numpy as np

from rlfleet.learner_worker.algorithms import Learner
from rlfleet.learner_worker.trainer import Trainer, check_finite
from rlfleet.shared.algorithms.base import DatasetParams
from rlfleet.shared.payloads.codec import decode_chunk
from rlfleet.shared.payloads.framestack import flat_columns
from rlfleet.shared.payloads.recordings import check_usable, load_manifest, load_split
from rlfleet.shared.storage.factory import open_datasets, open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import DatasetBatch, DatasetFile, DatasetSampleRequest, LearnerTask
from rlfleet.shared.worker.session import WorkerSession

log = logging.getLogger("rlfleet.learner")
BEST_MODEL, BEST_MODEL_SCORES = "model.safetensors", "model.json"


class DatasetLearner(Learner, Protocol):
    policy: bool  # publishes policies (judged in the env), or saves a model of other columns
    columns: tuple[str, ...]  # the chunk columns it trains on

    def evaluate(self, batch: dict[str, np.ndarray]) -> dict[str, float]: ...
    def model_file(self) -> bytes: ...


class DatasetTrainer(Trainer):
    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        super().__init__(session, layout, task)
        if not isinstance(task.algo, DatasetParams):
            raise TypeError(f"{task.algo.name} parameters are not a dataset loop's")
        self.params = task.algo
        # Every due version is read (Trainer.waited_on): the evaluator judges each epoch's policy. Held back until
        # collectors had stepped, as the trainer does otherwise, none after the first would ever be written here.
        self.waited_on = True
        self.datasets = open_datasets(layout.data_dir, layout.store)
        manifest = load_manifest(self.datasets, self.params.dataset)
        check_usable(manifest, task.spaces)
        self.dataset_learner: DatasetLearner = self.learner  # type: ignore[assignment]
        self.columns = self.dataset_learner.columns
        self.valid = {k: v for k, v in load_split(self.datasets, manifest, "valid").items() if k in self.columns}
        self.files: dict[str, dict[str, np.ndarray]] = {}  # path -> the episode's columns, flattened to rows
        self.best_loss = self._best_so_far()
        self.scores: dict[str, float] = {}  # the latest epoch's valid_* and the epoch, in every report after it
        log.info("training on dataset %s: %d train / %d valid transitions, %d epochs", manifest.name,
                 manifest.splits["train"].transitions, manifest.splits["valid"].transitions, self.params.epochs)

    def io_summary(self) -> str:
        return f"{len(self.files)} dataset files read"

    def _file(self, ref: DatasetFile) -> dict[str, np.ndarray]:
        if ref.path not in self.files:
            arrays = flat_columns(decode_chunk(self.datasets.get(ref.path, ref.sha256))[0])
            rows = np.asarray(arrays["rewards"]).size
            self.files[ref.path] = {k: np.asarray(arrays[k]).reshape(rows, *np.asarray(arrays[k]).shape[2:])
                                    for k in self.columns}
        return self.files[ref.path]

    def rows(self, batch: DatasetBatch) -> dict[str, np.ndarray]:
        """The batch's transitions, in its order."""
        files = [self._file(ref) for ref in batch.files]
        index, rows = np.asarray(batch.file_index), np.asarray(batch.rows)
        out = {}
        for column in self.columns:
            first = files[0][column]
            values = np.empty((len(rows), *first.shape[1:]), first.dtype)
            for i, arrays in enumerate(files):
                mine = index == i
                values[mine] = arrays[column][rows[mine]]
            out[column] = values
        return out

    def loop(self, running: Callable[[], bool]) -> None:
        while running():
            batch = self.session.client.call(
                "POST", f"/v1/datasets/{self.params.dataset}/sample", DatasetBatch,
                DatasetSampleRequest(worker_id=self.session.worker_id, request_id=uuid.uuid4().hex,
                                     batch_size=self.params.batch_size))
            self.session.update(batch.directive)
            if not batch.files:  # every epoch was trained: the run ends once the evaluator has judged the last policy
                log.info("all %d epochs trained; waiting for the evaluator's verdict on policy v%d",
                         self.params.epochs, self.version)
                while running():
                    self.session.stop_event.wait(0.5)
                return
            data = self.rows(batch)
            if "obs" in data:
                self.observe(data["obs"])
            losses = self.update(data)
            check_finite(self.iteration + 1, losses)
            policy = self.dataset_learner.policy
            publish = policy and (self.iteration + 1) % self.params.publish_every == 0
            if batch.epoch_complete:
                self.scores = self.dataset_learner.evaluate(self.valid) | {"epoch": float(batch.epoch)}
                check_finite(self.iteration + 1, self.scores)
                log.info("epoch %d: %s", batch.epoch, ", ".join(f"{k} {v:.4g}" for k, v in self.scores.items()))
                publish = policy
                if not policy:
                    self.save_model(batch.epoch)
            self.after_update(losses | self.scores, len(batch.rows), publish)
            if batch.epoch_complete and self.iteration % self.params.report_every:
                self.report(self.losses)  # every epoch's scores reach status and TensorBoard

    def _best_so_far(self) -> float:
        """The valid loss of the best model a previous process of this run saved (a resumed learner must not
        replace it with a worse one)."""
        try:
            return float(json.loads(open_store(self.layout, "best").get(BEST_MODEL_SCORES))["valid_loss"])
        except (FileNotFoundError, KeyError, ValueError):
            return float("inf")

    def save_model(self, epoch: int) -> None:
        """Keep this epoch's model in the run's store, and as the best one while its valid loss is the lowest."""
        data = self.dataset_learner.model_file()
        self.store.put(f"models/epoch-{epoch:06d}.safetensors", data)
        loss = self.scores.get("valid_loss", float("inf"))
        if loss < self.best_loss:
            self.best_loss = loss
            best = open_store(self.layout, "best")
            best.put(BEST_MODEL, data)
            best.put(BEST_MODEL_SCORES, json.dumps({"epoch": epoch, "iteration": self.iteration + 1,
                                                    **self.scores}, indent=1).encode())
