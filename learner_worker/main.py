"""The learner process: claim the learner task, resume from the newest checkpoint, then train.

Loop: batch from the prefetch queue -> DQN update -> every `publish_every` iterations a new immutable
policy file and version -> every `report_every` a learn-info report -> checkpoints periodically and on stop.
Policy versions keep increasing across restarts: a resumed learner continues from the larger of its
checkpoint's version and the coordinator's latest.
"""

from __future__ import annotations

import logging
import math
import time

from learner_worker.cache import ChunkCache
from learner_worker.checkpoint import Checkpoint, load_latest_checkpoint, save_checkpoint
from learner_worker.dqn import DQN
from learner_worker.prefetch import Prefetcher
from shared.client import CoordinatorRejected
from shared.envs import make_vector_env, space_dims
from shared.layout import RunLayout
from shared.policy_io import save_policy
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.store import LocalStore
from shared.wire import Ack, LearnerTask, LearnReport, PolicyPublish
from shared.worker import run_worker

log = logging.getLogger("rlfleet.learner")


def run_learner(settings: WorkerSettings) -> int:
    return run_worker(settings, "learner", _claim_and_train)


def _claim_and_train(session: WorkerSession, layout: RunLayout) -> None:
    for task in session.tasks(LearnerTask):
        Trainer(session, layout, task).train()


def cache_chunks(task: LearnerTask) -> int:
    """Room for every chunk the buffer can hold plus a margin: evicted chunks then age out of the cache
    instead of piling up (2048-transition chunks cost ~100 KB each once prepared)."""
    per_chunk = task.collector.num_envs * task.collector.chunk_steps
    return math.ceil(1.25 * task.replay.capacity_transitions / per_chunk) + 8


class Trainer:
    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        self.session, self.layout, self.task, self.cfg = session, layout, task, task.dqn
        self.store = LocalStore(layout.store_root)
        probe = make_vector_env(task.env.id, 1)
        obs_dim, n_actions = space_dims(probe)
        probe.close()
        self.algo = DQN(obs_dim, n_actions, self.cfg, task.seed)
        self.iteration = 0
        self.transitions = 0
        latest = session.directive.policy
        self.version = latest.version if latest else 0
        ckpt = load_latest_checkpoint(layout.checkpoints)
        if ckpt is not None:
            self.algo.load(ckpt.algo)
            self.iteration, self.transitions = ckpt.iteration, ckpt.transitions_trained
            self.version = max(self.version, ckpt.policy_version)
            log.info("resumed from iteration %d, policy v%d", self.iteration, self.version)

    def train(self) -> None:
        cache = ChunkCache(self.store, self.cfg.gamma, self.cfg.n_step, max_chunks=cache_chunks(self.task),
                           seed=self.task.seed)
        prefetch = Prefetcher(self.session, cache, self.task.buffer_id, self.cfg.batch_size,
                              self.cfg.batches_per_request)
        generation = self.session.generation
        losses: dict[str, float] = {}
        started = time.monotonic()
        try:
            while self.session.running and self.session.generation == generation:
                batch = prefetch.get(timeout=0.5)
                if batch is None:
                    continue
                losses = self.algo.update(batch)
                self.iteration += 1
                self.transitions += len(batch["actions"])
                if self.iteration % self.cfg.publish_every == 0:
                    self.publish()
                if self.iteration % self.cfg.report_every == 0:
                    self.report(losses)
                if self.iteration % self.cfg.checkpoint_every == 0:
                    self.checkpoint()
        except CoordinatorRejected as exc:
            if exc.status != 404:
                raise
            log.warning("lease lost (%s); registering again", exc)
            self.session.register()
        finally:
            prefetch.stop()
            self.checkpoint()
            rate = self.iteration / max(1e-9, time.monotonic() - started)
            log.info("learner stopped at iteration %d (%.0f it/s this session; %d payloads loaded, %d missing)",
                     self.iteration, rate, cache.loaded, cache.missing)

    def publish(self) -> None:
        self.version += 1
        ref = save_policy(self.store, self.version, self.algo.policy_state())
        ack = self.session.client.call("POST", "/v1/policies", Ack, PolicyPublish(
            worker_id=self.session.worker_id, policy=ref, iteration=self.iteration))
        self.session.update(ack.directive)

    def report(self, losses: dict[str, float]) -> None:
        ack = self.session.client.call("POST", "/v1/learn-info", Ack, LearnReport(
            worker_id=self.session.worker_id, iteration=self.iteration,
            losses={k: v for k, v in losses.items() if v == v and abs(v) != float("inf")},
            transitions_trained=self.transitions))
        self.session.update(ack.directive)

    def checkpoint(self) -> None:
        save_checkpoint(self.layout.checkpoints,
                        Checkpoint(self.iteration, self.version, self.transitions, self.algo.state(),
                                   env_steps=self.session.directive.env_steps_total))

