"""What every learner loop shares: resume, publish, report, checkpoint, and the loop's stop conditions.

Policy versions keep increasing across restarts: a resumed learner continues from the larger of its
checkpoint's version and the coordinator's latest. A non-finite loss or TD error is a training failure, not
something to average away or to send as a priority: the learner raises TrainingDiverged naming the
iteration, exits non-zero (see shared/worker/lifecycle.py), and does not checkpoint the broken model, so a restart
resumes from the last good checkpoint.

A due version (every update of the chunk loop, every `publish_every` of the replay loop) is written only once a
collector can load it before the next one: once the coordinator has acknowledged env steps since the previous
version. While collectors are paused (the rate limiter holds them while the learner catches up) or stalled, versions
no collector would ever load are not written; the one pending is written at the first acknowledged step, before a
checkpoint and before an operator's evaluation. Rounds a collector waits on (force_sync, lockstep) always publish.
Measured through `rlfleet up` on configs/cartpole_dqn.yaml (~35k env steps, one run each): 108
versions of 271 KB were written and each collector loaded 19-20 of them; now 8, each loaded by both collectors:
policy bytes per collected env step 794 -> 62 (chunk payloads: 47), the first validation at 500 at the same 18,432
env steps. Checkpoints were already written only at `checkpoint_every`, an operator's request and the end.

In a learner group (`learner.replicas` > 1, learner_worker/distributed.py) every rank trains, compares its
weights with the others' after every update and counts the group's transitions; rank 0 alone publishes,
reports, checkpoints and runs hooks.

Two operator commands reach the learner between updates: live settings (a count in the directive: the learner
re-reads its task and takes up the algorithm's new hyperparameters, learning rate included, as schedules do), and a
checkpoint load from another run (the directive names the staged file): the learner checks every tensor's shape
against its own before it takes any (never half-loaded), continues from those weights, optimizer state and
observation statistics with its own counters, publishes them and checkpoints, so collectors act with them at once
and a restart keeps them.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlfleet.learner_worker.algorithms import Learner, load_learner
from rlfleet.learner_worker.cache import PayloadReader
from rlfleet.learner_worker.checkpoint import (
    Checkpoint,
    decode_checkpoint,
    load_latest_checkpoint,
    save_checkpoint,
    tensor_layout,
)
from rlfleet.learner_worker.device import precision, resolve_device
from rlfleet.learner_worker.distributed import join_group
from rlfleet.learner_worker.hooks import learner_hooks
from rlfleet.learner_worker.obsnorm import RunningStats
from rlfleet.learner_worker.schedules import Schedules, optimizers
from rlfleet.shared.config.plan import chunk_schema
from rlfleet.shared.envs.wrappers import NormalizeObs
from rlfleet.shared.policy.files import save_policy
from rlfleet.shared.storage.factory import open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.protocol import StoreUnavailable
from rlfleet.shared.wire import Ack, CheckpointLoadRef, LearnerTask, LearnReport, PolicyPublish
from rlfleet.shared.worker.client import CoordinatorRejected
from rlfleet.shared.worker.session import COORDINATOR_ERRORS, WorkerSession, one_line

log = logging.getLogger("rlfleet.learner")


class TrainingDiverged(RuntimeError):
    """An update produced a non-finite loss or TD error: the model can no longer be trusted."""


def check_finite(iteration: int, losses: dict[str, float], td_abs: np.ndarray | None = None) -> None:
    """Raise TrainingDiverged naming `iteration` and the offending values unless everything is finite."""
    bad = [f"{name}={value}" for name, value in losses.items() if not math.isfinite(value)]
    if td_abs is not None and not np.isfinite(td_abs).all():
        bad.append(f"{int((~np.isfinite(td_abs)).sum())} of {td_abs.size} TD errors")
    if bad:
        raise TrainingDiverged(f"training diverged at iteration {iteration}: non-finite {', '.join(bad)}")


class Trainer:
    reader: PayloadReader

    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        self.session, self.layout, self.task = session, layout, task
        self.cfg = task.algo
        self.store = open_store(layout, "store")
        self.checkpoints = open_store(layout, "checkpoints")
        self.schema = chunk_schema(task.spaces, task.behaviour, task.env)
        if task.deterministic:  # same seed, same updates, same bytes: on the CPU, at one thread on every machine
            torch.use_deterministic_algorithms(True)
            torch.set_num_threads(1)
        self.device = resolve_device(task.learner.device)
        self.precision = precision(task.learner.amp, self.device)  # each update: `with self.precision():`
        self.group = join_group(task, self.device)
        self.leader = self.group is None or self.group.rank == 0  # publishes, reports, checkpoints, runs hooks
        self.learner: Learner = load_learner(task, self.device)
        log.info("training %s on %s", task.algo.name, self.device)
        norm = next((w for w in task.env.wrappers if isinstance(w, NormalizeObs)), None)
        self.obs_stats = None if norm is None else RunningStats.of(task.spaces.obs, norm.clip)
        self.iteration = 0
        self.transitions = 0
        self.losses: dict[str, float] = {}  # the last update's, for hooks
        self.waiting = 0.0  # seconds the training thread spent waiting for data (the loop counts them)
        self.started = time.monotonic()  # of this session's training (`train` sets it)
        latest = session.directive.policy
        self.version = latest.version if latest else 0
        self.checkpoints_asked = session.directive.checkpoints  # operator requests before this process: done
        self.evaluations_asked = session.directive.evaluations
        self.settings_seen = session.directive.settings  # the task just claimed has every change before it
        self.loaded: str | None = None  # the last checkpoint load from another run this learner's state includes
        # Every due version is read, so none is held back: collectors wait for each one (force_sync, deterministic);
        # a dataset loop, which has no collectors, sets it too (its evaluator judges each epoch's policy).
        self.waited_on = task.sampling.force_sync or task.deterministic
        self.pending = False  # a version is due but not written: no collector would have loaded it yet
        self.published_at = -1  # the coordinator's acknowledged env steps when the last version was written
        self.resume()
        if self.group is not None:
            self.group.agree("checkpoint resumed from", self.iteration)
            self.learner.join(self.group)
        self.hooks = learner_hooks(task.learner.hooks if self.leader else (), session.run_name, task.algo.name)
        self.schedules = Schedules(task.algo, self.group)
        self.load_if_asked()  # a load asked for before this process wrote a checkpoint with it

    def update(self, batch: Any) -> dict[str, float]:
        """The learner's update on `batch` with its scheduled hyperparameters set first: its losses, and the
        scheduled values under their field names (so status and TensorBoard show them)."""
        scheduled = self.schedules.apply(self.learner, self.session.directive.env_steps_total, self.iteration)
        return {**self.learner.update(batch), **scheduled}

    def resume(self) -> None:
        ckpt = load_latest_checkpoint(self.checkpoints)
        if ckpt is not None:
            self.learner.load(ckpt.algo)
            if self.obs_stats is not None and ckpt.obs_stats is not None:
                self.obs_stats.load(ckpt.obs_stats)
                self.obs_stats.apply_to(self.learner)
            self.iteration, self.transitions = ckpt.iteration, ckpt.transitions_trained
            self.version = max(self.version, ckpt.policy_version)
            self.loaded = ckpt.loaded
            log.info("resumed from iteration %d, policy v%d", self.iteration, self.version)

    def load_if_asked(self) -> None:
        """Take up the checkpoint load the directive names, unless this learner's state already includes it."""
        ref = self.session.directive.checkpoint_load
        if ref is not None and ref.load_id != self.loaded and self.leader and self.group is None:
            self.load_from(ref)

    def load_from(self, ref: CheckpointLoadRef) -> None:
        """Continue from the staged checkpoint `ref` (another run's): all its tensors or none of them."""
        self.loaded = ref.load_id  # asked once: a refused load is not retried at every update (nor after a restart)
        try:
            ckpt = decode_checkpoint(self.checkpoints.get(ref.path))
        except StoreUnavailable:
            raise  # not the file's fault: the restarted learner takes the load up once the store answers
        except Exception as exc:  # a staged file gone or damaged: refused like one that does not fit
            log.error("checkpoint load %s refused: %s cannot be read (%s); training goes on from this learner's "
                      "own weights", ref.load_id, ref.path, exc)
            return
        ours, theirs = tensor_layout(self.learner.state()), tensor_layout(ckpt.algo)
        if ours != theirs:
            differ = sorted(set(ours) ^ set(theirs)) or sorted(k for k in ours if ours[k] != theirs[k])
            log.error("checkpoint load %s refused: its learner state differs from this learner's at %s; training "
                      "goes on from this learner's own weights", ref.load_id, ", ".join(differ[:3]))
            return
        if (self.obs_stats is None) != (ckpt.obs_stats is None):
            log.error("checkpoint load %s refused: it was trained %s observation normalisation and this run %s; "
                      "training goes on from this learner's own weights", ref.load_id,
                      "without" if ckpt.obs_stats is None else "with",
                      "normalises" if self.obs_stats is not None else "does not")
            return
        self.learner.load(ckpt.algo)
        self.apply_settings(self.task)  # the optimizers keep this run's hyperparameters, not the source's
        if self.obs_stats is not None and ckpt.obs_stats is not None:
            self.obs_stats.load(ckpt.obs_stats)
            self.obs_stats.apply_to(self.learner)
        log.info("continuing from checkpoint load %s (source iteration %d, %d env steps)", ref.load_id,
                 ckpt.iteration, ckpt.env_steps)
        self.pending = True
        self.publish()
        self.checkpoint()

    def reread_settings(self) -> None:
        """An operator changed live settings: the task as the coordinator now describes it, its algorithm's
        hyperparameters taken up from the next update."""
        self.settings_seen = self.session.directive.settings
        fresh = self.session.claim()
        if isinstance(fresh, LearnerTask) and fresh.task_id == self.task.task_id:
            old, new = self.task.algo.model_dump(), fresh.algo.model_dump()
            self.task = fresh
            self.apply_settings(fresh)
            log.info("live settings changed: %s", ", ".join(f"{key} {old[key]} -> {new[key]}" for key in new
                                                           if new[key] != old.get(key)) or "none of the algorithm's")

    def apply_settings(self, task: LearnerTask) -> None:
        """Hyperparameters from `task`: the learner's config, its schedules and its optimizers' learning rate."""
        self.cfg = task.algo
        learner: Any = self.learner  # every learner reads its hyperparameters from `cfg` at each update
        learner.cfg = task.algo
        self.schedules = Schedules(task.algo, self.group)
        rate = getattr(task.algo, "learning_rate", None)
        if rate is not None:
            for optimizer in optimizers(self.learner):
                for group in optimizer.optimizer.param_groups:
                    group["lr"] = rate

    def train(self) -> None:
        generation = self.session.generation
        started, first = time.monotonic(), self.iteration
        self.started = started
        diverged = False
        self.hooks.fire("start", self)
        try:
            self.loop(lambda: self.session.running and self.session.generation == generation)
        except CoordinatorRejected as exc:
            if exc.status != 404 or self.group is not None:  # a rank cannot rejoin alone: torchrun re-forms all
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
            self.end_hooks(self.session.fatal or sys.exc_info()[1])  # what ended training, if not the run
            rate = (self.iteration - first) / max(1e-9, time.monotonic() - started)
            log.info("learner stopped at iteration %d (%.1f it/s this session; %s)", self.iteration, rate,
                     self.io_summary())
            if self.group is not None:
                self.group.leave()

    def loop(self, running: Callable[[], bool]) -> None:
        raise NotImplementedError

    def io_summary(self) -> str:
        """What the loop read, and how much of its time the training thread waited for it, for the stop line."""
        idle = self.waiting / max(1e-9, time.monotonic() - self.started)
        return (f"{self.reader.loaded} payloads loaded, {self.reader.missing} missing; the training thread waited "
                f"for data {idle:.0%} of the time")

    def end_hooks(self, ending: BaseException | None) -> None:
        """The end hooks hear of every ending but a crash of the learner itself (a bug, here or in another
        thread: nothing it would tell them can be trusted); a divergence or a lost coordinator comes in the
        view's `error`. An end hook failing after the run ended is reported at once: the last report went before."""
        if ending is not None and not isinstance(ending, (TrainingDiverged, *COORDINATOR_ERRORS)):
            return
        if self.hooks.fire("end", self, None if ending is None else one_line(ending)) and ending is None:
            self.report(self.losses)

    def stop(self) -> None:
        """Release background resources (the replay loop's prefetcher)."""

    def observe(self, obs: np.ndarray) -> None:
        """Fold the observations about to be trained on ([M, *obs], valid rows only) into the statistics, and
        hand them to the learner's networks (normalize_obs; otherwise nothing)."""
        if self.obs_stats is not None:
            obs = self.obs_stats.normalised(obs)
            if self.group is None:
                self.obs_stats.update(obs)
            else:  # every rank folds in all ranks' rows: their networks must normalise alike
                self.obs_stats.merge(*self.group.moments(obs))
            self.obs_stats.apply_to(self.learner)

    def after_update(self, losses: dict[str, float], rows: int, publish: bool) -> None:
        """Count an update; publish, report and checkpoint when due."""
        self.iteration += 1
        if self.group is not None:
            self.group.check_weights(self.iteration)
            rows = int(self.group.sum(torch.tensor([rows])).item())  # the group's transitions, not this rank's
        self.transitions += rows
        self.losses = losses
        if not self.leader:
            return
        directive = self.session.directive
        if directive.settings > self.settings_seen and self.group is None:
            self.reread_settings()
        self.load_if_asked()
        self.pending = self.pending or publish
        asked = directive.checkpoints
        checkpoint = self.iteration % self.cfg.checkpoint_every == 0 or asked > self.checkpoints_asked
        evaluation = directive.evaluations > self.evaluations_asked
        self.evaluations_asked = directive.evaluations
        if self.pending and (self.waited_on or directive.env_steps_total > self.published_at or checkpoint
                             or evaluation):
            self.publish()
        self.hooks.fire("every", self)  # before the report, which then names a hook that failed just now
        if self.iteration % self.cfg.report_every == 0:
            self.report(losses)
        if checkpoint:
            if asked > self.checkpoints_asked:
                log.info("checkpoint at iteration %d, as an operator asked", self.iteration)
            self.checkpoints_asked = asked
            self.checkpoint()

    def publish(self) -> None:
        if not self.leader:
            return
        self.pending = False
        self.published_at = self.session.directive.env_steps_total
        self.version += 1
        manifest = self.learner.manifest()
        if self.obs_stats is not None:  # frozen as trained with: actors normalise with exactly these
            manifest = manifest.model_copy(update={"obs_norm": self.obs_stats.frozen()})
        ref = save_policy(self.store, self.version, self.learner.policy_state(), manifest)
        # Logged before the request, with the collectors' "acting with" lines: the benchmark's propagation time.
        log.info("publishing policy v%d", self.version)
        ack = self.session.client.call("POST", "/v1/policies", Ack, PolicyPublish(
            worker_id=self.session.worker_id, policy=ref, iteration=self.iteration))
        self.session.update(ack.directive)
        self.hooks.fire("publish", self)

    def report(self, losses: dict[str, float]) -> None:
        if not self.leader:
            return
        ack = self.session.client.call("POST", "/v1/learn-info", Ack, LearnReport(
            worker_id=self.session.worker_id, iteration=self.iteration, losses=losses,  # finite: check_finite
            transitions_trained=self.transitions, hooks_failed=self.hooks.failed))
        self.session.update(ack.directive)

    def checkpoint(self) -> None:
        if not self.leader:
            return
        save_checkpoint(self.checkpoints,
                        Checkpoint(self.iteration, self.version, self.transitions, self.learner.state(),
                                   env_steps=self.session.directive.env_steps_total,
                                   obs_stats=None if self.obs_stats is None else self.obs_stats.state(),
                                   loaded=self.loaded),
                        algorithm=self.task.algo.name, manifest=self.learner.manifest().model_dump(mode="json"))
