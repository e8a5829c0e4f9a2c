"""Calling the run's learner hooks (shared/config/hooks.py) from the training loop, and containing their failures.

Hooks are the one part of the learner whose exceptions do not end the worker (ISSUE-NOTES, issue 7): they are
the user's code beside training, not training. A hook that raises is logged with its traceback once, switched
off for the rest of the process (a trainer resumed after a lost lease included: the hooks are loaded once per
process), and named in every later learn-info report, so status and summary.json show it. KeyboardInterrupt
and SystemExit are not contained: they end the worker as anywhere else.

Hooks run in the training thread, between updates: a slow hook slows training by its own time.
"""

from __future__ import annotations

import functools
import logging
from typing import Protocol

from rlfleet.shared.config.hooks import Hook, HookConfig, HookEvent, HookView, ScoreView, load_hook
from rlfleet.shared.wire import Directive, Score
from rlfleet.shared.worker.session import one_line

log = logging.getLogger("rlfleet.learner")


class Session(Protocol):
    @property
    def directive(self) -> Directive:
        """The coordinator's latest reply's directive: what the learner last heard of the run."""


class Progress(Protocol):
    """What a hook's view is copied from: the trainer, and what its session last heard from the coordinator."""

    iteration: int
    transitions: int
    version: int
    losses: dict[str, float]

    @property
    def session(self) -> Session:
        """The learner's session with the coordinator."""


def _score(score: Score | None) -> ScoreView | None:
    return None if score is None else ScoreView(score.policy_version, score.mean, score.env_steps)


class LearnerHooks:
    def __init__(self, hooks: tuple[HookConfig, ...], run_name: str, algorithm: str) -> None:
        """Load every hook's function; HookLoadError (a config error, which ends the worker) if one does not
        load in this process."""
        self.hooks: list[tuple[HookConfig, Hook]] = [(hook, load_hook(i, hook.call)) for i, hook in enumerate(hooks)]
        self.run_name, self.algorithm = run_name, algorithm
        self.failed: dict[str, str] = {}  # hook name -> where and what it raised; switched off

    def fire(self, event: HookEvent, progress: Progress, error: str | None = None) -> bool:
        """Call the hooks of `event` that are on and due (at=every: when the iteration is a multiple of its
        period), each with its own view; True if one of them failed now."""
        due = [(hook, call) for hook, call in self.hooks if hook.at == event and hook.name not in self.failed
               and (hook.every is None or progress.iteration % hook.every == 0)]
        run = progress.session.directive
        for hook, call in due:
            try:
                call(HookView(event=event, run_name=self.run_name, algorithm=self.algorithm,
                              iteration=progress.iteration, transitions_trained=progress.transitions,
                              policy_version=progress.version, losses=progress.losses, error=error,
                              env_steps=run.env_steps_total, recent_return_mean=run.recent_return_mean,
                              latest_validation=_score(run.latest_validation), latest_test=_score(run.latest_test)))
            except Exception as exc:  # the user's code: contained, see the module doc
                log.exception("learner hook %s failed at iteration %d; it is switched off", hook.name,
                              progress.iteration)
                self.failed[hook.name] = f"at iteration {progress.iteration}: {one_line(exc)}"
        return any(hook.name in self.failed for hook, _ in due)


@functools.cache
def learner_hooks(hooks: tuple[HookConfig, ...], run_name: str, algorithm: str) -> LearnerHooks:
    """The process's hooks for this config: one set for every trainer it builds, so a hook switched off stays off."""
    return LearnerHooks(hooks, run_name, algorithm)
