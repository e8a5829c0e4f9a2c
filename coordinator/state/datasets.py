"""The run's dataset: a recorded dataset's train split served in epochs, every transition once per epoch.

The coordinator owns the order (a permutation per epoch, drawn from the run seed and the epoch number, so it
is rebuilt rather than stored) and the position in it, journalled with each batch: a restarted coordinator
goes on where it stopped. The last request id is journalled with the batch it was given (its epoch, start and
size: the batch is rebuilt from them), so a request retried after a restart between the commit and the reply
gets that batch again instead of skipping to the next. The dataset's files are
never touched here: they belong to the dataset store (shared/payloads/recordings.py), read-only for every run.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import numpy as np

from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.algorithms.base import DatasetParams
from rlfleet.shared.payloads.recordings import DatasetError, DatasetManifest, check_usable, load_manifest
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import DatasetFile, DatasetStatus, EpochScore


class DatasetServer:
    key: ClassVar[str] = "dataset"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self, manifest: DatasetManifest, seed: int, epochs: int) -> None:
        self.pending = Pending()
        train = manifest.splits["train"]
        self.manifest, self.seed, self.epochs = manifest, seed, epochs
        self.files = [DatasetFile(path=p, sha256=s) for p, s in zip(train.files, train.sha256, strict=True)]
        self.starts = np.concatenate([[0], np.cumsum(train.rows)]).astype(np.int64)
        self.total = int(self.starts[-1])
        self.epoch, self.cursor, self.batches = 1, 0, 0
        self.scores: list[EpochScore] = []  # the learner's valid-split scores after each epoch
        self.last: tuple[str, int, int, int] | None = None  # (request id, epoch, start, size) of the last batch

    @property
    def done(self) -> bool:
        return self.epoch > self.epochs

    @functools.lru_cache(maxsize=2)  # noqa: B019 - one server per run; two epochs' orders at most
    def _order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.total)

    def next_batch(self, size: int, request_id: str | None) -> dict[str, Any]:
        """The next `size` transitions of this epoch's order (fewer at the epoch's end) as the fields of a
        DatasetBatch; nothing once every epoch was served. A retry of the last request id gets its batch again."""
        if request_id is not None and self.last is not None and self.last[0] == request_id:
            return self._batch(*self.last[1:])
        self.pending.mark()
        if self.done:
            return {"epoch": 0, "epoch_complete": False, "files": [], "file_index": [], "rows": []}
        epoch, start = self.epoch, self.cursor
        self.cursor = min(start + size, self.total)
        if self.cursor == self.total:
            self.epoch, self.cursor = self.epoch + 1, 0
        self.batches += 1
        if request_id is not None:
            self.last = (request_id, epoch, start, size)
        return self._batch(epoch, start, size)

    def _batch(self, epoch: int, start: int, size: int) -> dict[str, Any]:
        """The fields of the DatasetBatch of `size` transitions from `start` in `epoch`'s order."""
        flat = self._order(epoch)[start:start + size]
        file_of = np.searchsorted(self.starts, flat, side="right") - 1
        used, index = np.unique(file_of, return_inverse=True)
        return {"epoch": epoch, "epoch_complete": start + len(flat) >= self.total,
                "files": [self.files[i] for i in used.tolist()], "file_index": index.tolist(),
                "rows": (flat - self.starts[file_of]).tolist()}

    def record_scores(self, losses: dict[str, float]) -> bool:
        """Keep an epoch's valid-split scores the first time a learn report carries them (`epoch` and `valid_*`
        values, as the dataset loop reports them); whether they were new."""
        epoch = losses.get("epoch")
        if epoch is None or (self.scores and self.scores[-1].epoch >= epoch):
            return False
        self.scores.append(EpochScore(epoch=int(epoch), scores={k: v for k, v in losses.items()
                                                                if k.startswith("valid_")}))
        self.pending.mark()
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "cursor": self.cursor, "batches": self.batches,
                "scores": [s.model_dump() for s in self.scores], "last": self.last}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        if state is not None:
            self.epoch, self.cursor, self.batches = int(state["epoch"]), int(state["cursor"]), int(state["batches"])
            self.scores = [EpochScore.model_validate(s) for s in state["scores"]]
            last = state.get("last")  # absent in journals written before retries were kept across restarts
            self.last = None if last is None else (str(last[0]), int(last[1]), int(last[2]), int(last[3]))

    def status(self) -> DatasetStatus:
        m = self.manifest
        returns = m.splits["train"].returns + m.splits["valid"].returns
        return DatasetStatus(name=m.name, train_episodes=m.splits["train"].episodes, train_transitions=self.total,
                             valid_episodes=m.splits["valid"].episodes,
                             recorded_return_mean=float(np.mean(returns)), epoch=self.epoch, epochs=self.epochs,
                             batches_served=self.batches, epoch_scores=list(self.scores))


def dataset_server(algo: DatasetParams, seed: int, spaces: Spaces, store: PayloadStore | None) -> DatasetServer:
    """A dataset run's server of its recording, refused at start if the recording is missing, unreadable, of other
    spaces than the run's env, or has an empty split."""
    if store is None:
        raise DatasetError(f"algo.dataset {algo.dataset!r}: this coordinator has no dataset store")
    manifest = load_manifest(store, algo.dataset)
    check_usable(manifest, spaces)
    return DatasetServer(manifest, seed, algo.epochs)
