"""The learner process: claim the learner task, resume from the newest checkpoint, then train.

Which learner it drives comes from the algorithm's registry entry (shared/algorithms), which trainer runs it
from the entry of the algorithm's loop kind (shared/loops); this module knows no algorithm and no loop kind.
"""

from __future__ import annotations

import logging

import torch

from rlfleet.learner_worker.elastic import is_rank, rank_registration, run_agent, run_config
from rlfleet.learner_worker.threads import torch_threads
from rlfleet.learner_worker.trainer import Trainer
from rlfleet.shared.algorithms import spec_of
from rlfleet.shared.loops import loop_of
from rlfleet.shared.loops.kind import resolve
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import LearnerTask
from rlfleet.shared.worker.lifecycle import exit_code, run_worker
from rlfleet.shared.worker.session import COORDINATOR_ERRORS, WorkerSession, one_line
from rlfleet.shared.worker.settings import WorkerSettings

log = logging.getLogger("rlfleet.learner")


def run_learner(settings: WorkerSettings) -> int:
    """Train as the run's learner; with `learner.replicas` > 1, run the elastic agent whose worker is one rank of
    the learner group (learner_worker/elastic.py)."""
    if not is_rank():
        try:
            config = run_config(settings)
        except COORDINATOR_ERRORS as exc:
            log.error("learner exits with status %d: %s", exit_code(exc), one_line(exc))
            return exit_code(exc)
        if config.learner.replicas > 1:
            return run_agent(config)
    torch.set_num_threads(torch_threads(settings.torch_threads))
    log.info("torch computes with %d threads (RLFLEET_TORCH_THREADS=%s)", torch.get_num_threads(),
             settings.torch_threads)
    return run_worker(settings, "learner", _claim_and_train, registration=rank_registration())


def _claim_and_train(session: WorkerSession, layout: RunLayout) -> None:
    for task in session.tasks(LearnerTask):
        trainer: type[Trainer] = resolve(loop_of(spec_of(task.algo).loop).trainer)
        trainer(session, layout, task).train()
