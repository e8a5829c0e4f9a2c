"""The learner process: claim the learner task, resume from the newest checkpoint, then train.

DQN loop: batch from the prefetch queue -> update -> (prioritized replay: TD errors back as priorities,
sent by the prefetch thread) -> every `publish_every` iterations a new immutable policy file and version.
PPO loop (on-policy): take the fresh chunks from the queue -> update -> publish at once, since collectors
acting with an old policy is exactly the lag being bounded. Both report learn info and checkpoint
periodically and on stop. Policy versions keep increasing across restarts: a resumed learner continues
from the larger of its checkpoint's version and the coordinator's latest.

A non-finite loss or TD error is a training failure, not something to average away or to send as a priority:
the learner raises TrainingDiverged naming the iteration, exits non-zero (see shared/worker.py), and does not
checkpoint the broken model, so a restart resumes from the last good checkpoint.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from learner_worker.cache import ChunkCache, PayloadReader
from learner_worker.checkpoint import Checkpoint, load_latest_checkpoint, save_checkpoint
from learner_worker.dqn import DQN
from learner_worker.ppo import PPO
from learner_worker.prefetch import Prefetcher, report_corrupt
from shared.client import CoordinatorRejected
from shared.envs import make_vector_env, space_dims
from shared.layout import RunLayout
from shared.policy_io import save_policy
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.store import LocalStore
from shared.wire import Ack, LearnerTask, LearnReport, PolicyPublish, SampleRequest, SampleResponse
from shared.worker import run_worker

log = logging.getLogger("rlfleet.learner")
MAX_CHUNKS_PER_TAKE = 256  # PPO: an upper bound on chunks per sample; max_batch_size is the real limit


class TrainingDiverged(RuntimeError):
    """An update produced a non-finite loss or TD error: the model can no longer be trusted."""


def check_finite(iteration: int, losses: dict[str, float], td_abs: np.ndarray | None = None) -> None:
    """Raise TrainingDiverged naming `iteration` and the offending values unless everything is finite."""
    bad = [f"{name}={value}" for name, value in losses.items() if not math.isfinite(value)]
    if td_abs is not None and not np.isfinite(td_abs).all():
        bad.append(f"{int((~np.isfinite(td_abs)).sum())} of {td_abs.size} TD errors")
    if bad:
        raise TrainingDiverged(f"training diverged at iteration {iteration}: non-finite {', '.join(bad)}")


class Algorithm(Protocol):
    def policy_state(self) -> dict[str, torch.Tensor]: ...
    def state(self) -> dict: ...
    def load(self, state: dict) -> None: ...


def run_learner(settings: WorkerSettings) -> int:
    torch.set_num_threads(settings.torch_threads)  # the only service with torch: collectors act in numpy
    return run_worker(settings, "learner", _claim_and_train)


def _claim_and_train(session: WorkerSession, layout: RunLayout) -> None:
    for task in session.tasks(LearnerTask):
        trainer = PPOTrainer(session, layout, task) if task.algo == "ppo" else DQNTrainer(session, layout, task)
        trainer.train()


def cache_chunks(task: LearnerTask) -> int:
    """Room for every chunk the buffer can hold plus a margin: evicted chunks then age out of the cache
    instead of piling up (2048-transition chunks cost ~100 KB each once prepared)."""
    per_chunk = task.collector.num_envs * task.collector.chunk_steps
    return math.ceil(1.25 * task.replay.capacity_transitions / per_chunk) + 8


class Trainer:
    """What both algorithms share: resume, publish, report, checkpoint, and the loop's stop conditions."""

    algo: Algorithm
    reader: PayloadReader

    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        self.session, self.layout, self.task = session, layout, task
        self.store = LocalStore(layout.store_root)
        probe = make_vector_env(task.env, 1)
        self.obs_dim, self.n_actions = space_dims(probe)
        probe.close()
        self.iteration = 0
        self.transitions = 0
        latest = session.directive.policy
        self.version = latest.version if latest else 0

    def resume(self) -> None:
        ckpt = load_latest_checkpoint(self.layout.checkpoints)
        if ckpt is not None:
            self.algo.load(ckpt.algo)
            self.iteration, self.transitions = ckpt.iteration, ckpt.transitions_trained
            self.version = max(self.version, ckpt.policy_version)
            log.info("resumed from iteration %d, policy v%d", self.iteration, self.version)

    def train(self) -> None:
        generation = self.session.generation
        started, first = time.monotonic(), self.iteration
        diverged = False
        try:
            self.loop(lambda: self.session.running and self.session.generation == generation)
        except CoordinatorRejected as exc:
            if exc.status != 404:
                raise
            log.warning("lease lost (%s); registering again", exc)
            self.session.register()
        except TrainingDiverged:
            diverged = True  # keep the last good checkpoint: a restart must not resume a broken model
            raise
        finally:
            self.stop()
            if not diverged:
                self.checkpoint()
            rate = (self.iteration - first) / max(1e-9, time.monotonic() - started)
            log.info("learner stopped at iteration %d (%.1f it/s this session; %d payloads loaded, %d missing)",
                     self.iteration, rate, self.reader.loaded, self.reader.missing)

    def loop(self, running: Callable[[], bool]) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Release background resources (the DQN prefetcher)."""

    def publish(self) -> None:
        self.version += 1
        ref = save_policy(self.store, self.version, self.algo.policy_state())
        # Logged before the request, with the collectors' "acting with" lines: the benchmark's propagation time.
        log.info("publishing policy v%d", self.version)
        ack = self.session.client.call("POST", "/v1/policies", Ack, PolicyPublish(
            worker_id=self.session.worker_id, policy=ref, iteration=self.iteration))
        self.session.update(ack.directive)

    def report(self, losses: dict[str, float]) -> None:
        ack = self.session.client.call("POST", "/v1/learn-info", Ack, LearnReport(
            worker_id=self.session.worker_id, iteration=self.iteration, losses=losses,  # finite: check_finite
            transitions_trained=self.transitions))
        self.session.update(ack.directive)

    def checkpoint(self) -> None:
        save_checkpoint(self.layout.checkpoints,
                        Checkpoint(self.iteration, self.version, self.transitions, self.algo.state(),
                                   env_steps=self.session.directive.env_steps_total))


class DQNTrainer(Trainer):
    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        super().__init__(session, layout, task)
        self.cfg = task.dqn
        self.algo = self.dqn = DQN(self.obs_dim, self.n_actions, self.cfg, task.seed)
        self.resume()
        self.prioritized = task.replay.sampler == "prioritized"
        self.reader = cache = ChunkCache(self.store, self.cfg.gamma, self.cfg.n_step, max_chunks=cache_chunks(task),
                                         seed=task.seed)
        self.prefetch = Prefetcher(session, cache, task.buffer_id, self.cfg.batch_size,
                                   self.cfg.batches_per_request)

    def loop(self, running: Callable[[], bool]) -> None:
        losses: dict[str, float] = {}
        while running():
            batch = self.prefetch.get(timeout=0.5)
            if batch is None:
                continue
            losses = self.dqn.update(batch)
            check_finite(self.iteration + 1, losses, self.dqn.td_abs)
            if self.prioritized:
                self.prefetch.send_priorities(batch["ids"], self.dqn.td_abs)
            self.iteration += 1
            self.transitions += len(batch["actions"])
            if self.iteration % self.cfg.publish_every == 0:
                self.publish()
            if self.iteration % self.cfg.report_every == 0:
                self.report(losses)
            if self.iteration % self.cfg.checkpoint_every == 0:
                self.checkpoint()

    def stop(self) -> None:
        self.prefetch.stop()


class PPOTrainer(Trainer):
    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        super().__init__(session, layout, task)
        self.cfg = task.ppo
        self.algo = self.ppo = PPO(self.obs_dim, self.n_actions, self.cfg, task.seed)
        self.resume()
        self.reader = PayloadReader(self.store)
        self.path = f"/v1/buffers/{task.buffer_id}/sample"

    def take(self) -> list[dict[str, np.ndarray]]:
        """The queue's fresh chunks (the coordinator waits up to max_wait_seconds for a full batch)."""
        # The id is fixed before the first try: a retry gets the chunks of the first reply, which max_use=1
        # has already consumed, instead of losing them and taking the next ones.
        request = SampleRequest(worker_id=self.session.worker_id, request_id=uuid.uuid4().hex,
                                batch_size=MAX_CHUNKS_PER_TAKE, num_batches=1)
        try:
            reply = self.session.client.call("POST", self.path, SampleResponse, request)
        except CoordinatorRejected as exc:
            if exc.error != "not_enough_data":
                raise
            return []  # the coordinator already waited max_wait_seconds; ask again
        self.session.update(reply.directive)
        chunks = [arrays for arrays in map(self.reader.read, reply.chunks) if arrays is not None]
        report_corrupt(self.session, self.task.buffer_id, self.reader)
        return chunks

    def loop(self, running: Callable[[], bool]) -> None:
        if self.version == 0:
            self.publish()  # collectors then all act with the learner's own initial policy
        while running():
            chunks = self.take()
            if not chunks:
                continue
            try:
                losses = self.ppo.update(chunks)
            except ValueError as exc:  # e.g. every row invalid (env errors): nothing to learn from
                log.warning("skipping batch: %s", exc)
                continue
            check_finite(self.iteration + 1, losses)
            self.iteration += 1
            self.transitions += sum(int(c["rewards"].size) for c in chunks)
            self.publish()
            if self.iteration % self.cfg.report_every == 0:
                self.report(losses)
            if self.iteration % self.cfg.checkpoint_every == 0:
                self.checkpoint()
