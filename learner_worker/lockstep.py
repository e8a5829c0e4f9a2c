"""The replay loop of a deterministic run: the learner and its one collector take turns.

Each turn: the collector has written chunk c and waits for a newer policy; the learner draws exactly the
batches the samples-per-insert ratio allows for chunks 1..c (the limiter runs with no tolerance in
deterministic runs, so the draw cannot start before chunk c is in), trains on them in order, sends
priorities before the next draw, and publishes one version; the collector acts with it for chunk c + 1. No
thread runs ahead (the prefetcher would draw while priorities are still unsent), so every draw, priority
and update happens in the same order in every run of the same seed.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable

import numpy as np

from rlfleet.learner_worker.cache import BatchReader
from rlfleet.learner_worker.prefetch import post_priorities, report_corrupt
from rlfleet.shared.wire import LearnerTask, SampleRequest, SampleResponse
from rlfleet.shared.worker.client import CoordinatorRejected
from rlfleet.shared.worker.session import WorkerSession


def batches_allowed(task: LearnerTask, chunks: int, batch_size: int) -> int:
    """Batches the ratio allows once `chunks` chunks are in: floor((rows - min) * spi / batch)."""
    rows = chunks * task.collector.num_envs * task.collector.chunk_steps
    return max(0, math.floor((rows - task.replay.min_transitions) * task.replay.samples_per_insert)) // batch_size


class LockstepFetcher:
    def __init__(self, session: WorkerSession, cache: BatchReader, buffer_id: str, batch_size: int,
                 batches_per_request: int) -> None:
        self.session, self.cache = session, cache
        self.buffer_id, self.batch_size, self.per_request = buffer_id, batch_size, batches_per_request
        self.path = f"/v1/buffers/{buffer_id}/sample"
        self.priority_path = f"/v1/buffers/{buffer_id}/priorities"
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []

    def send_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> None:
        self.pending.append((ids, priorities))

    def draw(self, count: int, running: Callable[[], bool]) -> list[dict[str, np.ndarray]]:
        """Exactly `count` batches' worth of draws (fewer batches only if payloads were unusable), waiting for
        the chunk that allows them; priorities of everything trained so far go first."""
        batches: list[dict[str, np.ndarray]] = []
        while count > 0 and running():
            post_priorities(self.session, self.priority_path, self.pending)
            self.pending = []
            size = min(count, self.per_request)
            request = SampleRequest(worker_id=self.session.worker_id, request_id=uuid.uuid4().hex,
                                    batch_size=self.batch_size, num_batches=size)
            try:
                reply = self.session.client.call("POST", self.path, SampleResponse, request)
            except CoordinatorRejected as exc:
                if exc.error == "not_enough_data":
                    continue  # the collector's chunk is not in yet
                raise
            self.session.update(reply.directive)
            batches += self.cache.batches(reply)
            report_corrupt(self.session, self.buffer_id, self.cache)
            count -= size
        return batches
