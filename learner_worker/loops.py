"""The trainers of the replay and chunk loop kinds (shared/loops/replay.py and chunks.py name them).

Replay loop (off-policy): batch from the prefetch queue -> update -> (prioritized replay: TD errors back as
priorities, sent by the prefetch thread) -> every `publish_every` updates a new immutable policy version.
Chunk loop (on-policy): take the fresh chunks from the queue -> update -> publish at once, since collectors
acting with an old policy is exactly the lag being bounded.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from rlfleet.learner_worker.cache import BatchReader, ChunkCache, PayloadReader
from rlfleet.learner_worker.distributed import next_step
from rlfleet.learner_worker.lockstep import LockstepFetcher, batches_allowed
from rlfleet.learner_worker.prefetch import ChunkFetcher, Prefetcher
from rlfleet.learner_worker.trainer import Trainer, check_finite
from rlfleet.shared.algorithms.base import ReplayParams
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import LearnerTask
from rlfleet.shared.worker.session import WorkerSession


def cache_chunks(task: LearnerTask) -> int:
    """Room for every chunk the buffer can hold plus a margin: evicted chunks then age out of the cache
    instead of piling up (2048-transition chunks cost ~100 KB each once prepared)."""
    per_chunk = task.collector.num_envs * task.collector.chunk_steps
    return math.ceil(1.25 * task.replay.capacity_transitions / per_chunk) + 8


class ReplayTrainer(Trainer):
    item_steps = 1  # env steps per sampled item (learner_worker/sequences.py's trainer samples longer ones)

    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        super().__init__(session, layout, task)
        cfg = task.algo
        if not isinstance(cfg, ReplayParams):
            raise TypeError(f"{cfg.name} parameters are not a replay loop's")
        self.replay_cfg = cfg
        self.prioritized = task.replay.traits.priorities
        self.reader = cache = self.batch_reader(task, cfg)
        share = cfg.batch_size // task.learner.replicas  # a learner group's ranks each sample an equal share
        args = (session, cache, task.buffer_id, share, cfg.batches_per_request)
        self.prefetch: Prefetcher | LockstepFetcher = LockstepFetcher(*args) if task.deterministic else Prefetcher(
            *args)

    def batch_reader(self, task: LearnerTask, cfg: ReplayParams) -> BatchReader:
        """What turns sample replies into batches: transitions with n-step targets."""
        return ChunkCache(self.store, self.schema, cfg.gamma, cfg.n_step, max_chunks=cache_chunks(task),
                          seed=task.seed)

    def trained_obs(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """The observations of the rows `batch` trains on, [M, *obs]: what observation statistics fold in and
        the count of transitions trained."""
        return batch["obs"]

    def loop(self, running: Callable[[], bool]) -> None:
        if isinstance(self.prefetch, LockstepFetcher):
            self.loop_lockstep(self.prefetch, running)
            return
        publish_every = self.replay_cfg.publish_every
        batch = None
        while True:
            if batch is None:
                waited = time.monotonic()
                batch = self.prefetch.get(timeout=0.5)
                self.waiting += time.monotonic() - waited
            step = next_step(self.group, running(), batch is not None)
            if step == "stop":
                return
            if step == "train" and batch is not None:
                self.train_batch(batch, publish=(self.iteration + 1) % publish_every == 0)
                batch = None

    def loop_lockstep(self, fetcher: LockstepFetcher, running: Callable[[], bool]) -> None:
        """One turn per chunk: draw what the ratio allows, train on it in order, publish (see lockstep.py)."""
        batch_size = self.replay_cfg.batch_size * self.item_steps  # the ratio counts env steps
        if self.version == 0:
            self.publish()  # the collector's first chunk is acted with this (seeded) policy
        chunk, drawn = 1, 0
        while running():
            allowed = batches_allowed(self.task, chunk, batch_size)
            for batch in fetcher.draw(allowed - drawn, running):
                self.train_batch(batch, publish=False)
            drawn, chunk = allowed, chunk + 1
            if running():
                self.publish()

    def train_batch(self, batch: dict[str, np.ndarray], publish: bool) -> None:
        obs = self.trained_obs(batch)
        self.observe(obs)
        with self.precision():
            losses = self.update(batch)
        td_abs = self.learner.td_abs
        check_finite(self.iteration + 1, losses, td_abs)
        if self.prioritized and td_abs is not None:
            self.prefetch.send_priorities(batch["ids"], td_abs)
        self.after_update(losses, len(obs), publish=publish)

    def stop(self) -> None:
        if isinstance(self.prefetch, Prefetcher):
            self.prefetch.stop()


class ChunkTrainer(Trainer):
    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        super().__init__(session, layout, task)
        self.reader = PayloadReader(self.store, self.schema)
        # Taken (the coordinator waits up to max_wait_seconds for a full batch) and decoded on the fetcher's thread.
        self.fetcher = ChunkFetcher(session, self.reader, task.buffer_id, ahead=task.sampling.policy_lag != 0)

    def stop(self) -> None:
        self.fetcher.stop()

    def loop(self, running: Callable[[], bool]) -> None:
        if self.version == 0:
            self.publish()  # collectors then all act with the learner's own initial policy
        chunks: list[dict[str, np.ndarray]] = []  # taken, not trained on yet (a rank waiting for the others)
        while True:
            valid = sum(int(np.count_nonzero(c["valid"])) for c in chunks)
            if not valid and running():
                waited = time.monotonic()
                chunks += self.fetcher.get(timeout=0.5)
                self.waiting += time.monotonic() - waited
                valid = sum(int(np.count_nonzero(c["valid"])) for c in chunks)
            step = next_step(self.group, running(), valid > 0)
            if step == "stop":
                return
            if step == "wait":
                continue
            chunks, taken = [], chunks
            if self.obs_stats is not None:
                self.observe(np.concatenate([c["obs"][c["valid"]] for c in taken]))
            with self.precision():
                losses = self.update(taken)  # the reader refused chunks it could not train on
            check_finite(self.iteration + 1, losses)
            self.after_update(losses, sum(int(c["rewards"].size) for c in taken), publish=True)

