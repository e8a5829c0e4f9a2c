"""The learner process: claim the learner task, resume from the newest checkpoint, then train.

Which loop runs and which learner it drives come from the algorithm's registry entry (shared/algorithms);
this module knows no algorithm.
"""

from __future__ import annotations

import importlib
import threading

import torch

from learner_worker.loops import TRAINERS
from shared.algorithms import spec_of
from shared.layout import RunLayout
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.wire import LearnerTask
from shared.worker import run_worker


def run_learner(settings: WorkerSettings) -> int:
    torch.set_num_threads(settings.torch_threads)  # collectors of MLP policies act in numpy
    _warm_up_optimizers()
    return run_worker(settings, "learner", _claim_and_train)


def _warm_up_optimizers() -> None:
    """Building any torch optimizer first imports torch._dynamo: a second of CPU (measured, torch 2.13) between
    claiming the task and publishing the first policy, which on-policy collectors wait for. Importing it in the
    background while the learner registers, usually before the coordinator even answers, takes that second off
    the start of every run; the import lock makes the optimizer wait if it is not done yet."""
    threading.Thread(target=importlib.import_module, args=("torch._dynamo",), name="warm-up", daemon=True).start()


def _claim_and_train(session: WorkerSession, layout: RunLayout) -> None:
    for task in session.tasks(LearnerTask):
        TRAINERS[spec_of(task.algo).loop](session, layout, task).train()
