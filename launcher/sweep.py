"""`rlfleet sweep SPEC.yaml`: an Optuna study whose trials are real rlfleet runs (launcher/child_run.py), as many
at once as the spec allows, scored by held-out tests (launcher/sweep_score.py) and resumable from its storage.

The driver asks Optuna for a trial, starts its run and watches it from one loop, with no threads: each turn it
feeds every running trial's new validation points to the pruner, stops (through the control plane) a trial the
pruner gives up on, and tells Optuna how each finished trial ended. So the study's storage (SQLite by default)
always says which trials are complete, pruned, failed or running, and the same command started again continues
up to the spec's total: trials the dead sweep left RUNNING are ended for good (any of their processes still alive
are stopped first), marked failed and queued again with the same settings, and only trials that ended by
themselves (complete, pruned, or failed on their own) count towards the total.

SIGTERM or Ctrl-C stops the running trials in order (each `rlfleet up` stops its run), marks them failed and queued
for the next start, writes the outputs and exits 130. One sweep at a time per output directory: a second is
refused, since it would take the first one's running trials for dead ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlfleet.launcher.child_run import ChildRun, end_group
from rlfleet.launcher.errors import UserError
from rlfleet.launcher.spec_files import override
from rlfleet.launcher.sweep_report import write_report
from rlfleet.launcher.sweep_score import SCORED_STATES, curve, pruner_value, score
from rlfleet.launcher.sweep_spec import Choice, FloatRange, IntRange, Sweep
from rlfleet.launcher.sweep_trial import trial_outcome, trial_validations
from rlfleet.shared.extras import require

POLL_SECONDS = 2.0
EXIT_DONE, EXIT_NO_RESULT, EXIT_INTERRUPTED = 0, 1, 130
RETRY_OF = "retry_of"  # user attribute of a trial re-running one that an ended sweep left unfinished


@dataclass
class Active:
    trial: Any  # optuna.trial.Trial
    run: ChildRun
    reported: set[int] = field(default_factory=set)
    pruned: bool = False


def distributions(sweep: Sweep) -> dict[str, Any]:
    optuna = require("optuna", "sweep", "rlfleet sweep")
    found: dict[str, Any] = {}
    for key, p in sweep.spec.space.items():
        if isinstance(p, FloatRange):
            found[key] = optuna.distributions.FloatDistribution(p.low, p.high, log=p.log)
        elif isinstance(p, IntRange):
            found[key] = optuna.distributions.IntDistribution(p.low, p.high, log=p.log)
        else:
            assert isinstance(p, Choice)
            found[key] = optuna.distributions.CategoricalDistribution(p.choices)
    return found


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the output directory's lock for the sweep's life; refuse if another sweep holds it."""
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise UserError(f"another `rlfleet sweep` is running on {path.parent} (it holds {path.name}): wait "
                            f"for it, stop it, or give this spec another output_dir") from exc
        yield


def settled(trials: list[Any]) -> int:
    """Trials that count towards the total: complete, pruned, or failed by themselves (not one a dead or stopped
    sweep left unfinished: those are queued again)."""
    from optuna.trial import TrialState

    retried = {t.user_attrs.get(RETRY_OF) for t in trials}
    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
               or (t.state == TrialState.FAIL and t.number not in retried) for t in trials)


class Driver:
    def __init__(self, sweep: Sweep, study: Any) -> None:
        self.sweep = sweep
        self.study = study
        self.spec = sweep.spec
        self.space = distributions(sweep)
        self.running: dict[int, Active] = {}
        self.interrupted = False

    # ----- the loop -----------------------------------------------------------------------------------------
    def run(self) -> int:
        previous = {signum: signal.signal(signum, self._interrupt) for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            while True:
                if self.interrupted:  # every turn: a trial started while the signal arrived is stopped too
                    for active in self.running.values():
                        active.run.terminate()
                else:
                    self._fill()
                if not self.running:
                    break
                for number in list(self.running):
                    self._watch(self.running[number])
                time.sleep(POLL_SECONDS)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return EXIT_INTERRUPTED if self.interrupted else EXIT_DONE

    def _interrupt(self, signum: int, frame: object) -> None:
        """First SIGTERM / Ctrl-C: start no trial, stop the running ones in order; the loop ends once they have."""
        if not self.interrupted:
            self.interrupted = True
            print(f"sweep: {signal.Signals(signum).name}: stopping {len(self.running)} running trials; start the "
                  f"same command again to continue", flush=True)

    def _fill(self) -> None:
        while len(self.running) < self.spec.parallel:
            trials = self.study.get_trials(deepcopy=False)
            if settled(trials) + len(self.running) >= self.spec.trials:
                return
            self._start()

    def _start(self) -> None:
        trial = self.study.ask(self.space)
        overrides = self.sweep.fixed + [override(k, v) for k, v in trial.params.items()]
        trial_dir = self.sweep.output_dir / "trials" / f"{trial.number:04d}"
        if trial_dir.exists():  # left by a study whose storage was since removed: keep it, out of the way
            trial_dir.rename(trial_dir.with_name(f"{trial_dir.name}.old-{time.strftime('%Y%m%d-%H%M%S')}"))
        run = ChildRun(trial_dir, self.sweep.base_path, [arg for item in overrides for arg in ("--set", item)])
        for key, value in {"trial_dir": str(trial_dir), "overrides": overrides, "log": str(run.log_path),
                           "pgid": run.pgid, "since": run.since, "port": run.port}.items():
            trial.set_user_attr(key, value)
        self.running[trial.number] = Active(trial, run)
        retry = trial.user_attrs.get(RETRY_OF)
        again = "" if retry is None else f" (again: trial {retry} was left unfinished)"
        print(f"trial {trial.number} started{again}: {' '.join(overrides)}; log {run.log_path}", flush=True)

    def _watch(self, active: Active) -> None:
        run = active.run
        if run.exit_code() is None:
            if run.overdue():
                run.kill()
            elif self.spec.pruner.kind != "none" and not active.pruned and not self.interrupted:
                self._feed_pruner(active)
            return
        self._finish(active, run.exit_code())

    def _report(self, active: Active, ended: bool = False) -> tuple[dict[int, float], list[int]]:
        """Hand the pruner the points of the trial's curve it has not seen; the curve and the new steps."""
        points = curve(trial_validations(active.run), self.spec.pruner.interval_env_steps, ended)
        new = sorted(step for step in points if step not in active.reported)
        for step in new:
            active.trial.report(pruner_value(points[step], self.spec.direction), step)
            active.reported.add(step)
        return points, new

    def _feed_pruner(self, active: Active) -> None:
        points, new = self._report(active)
        if new and active.trial.should_prune():
            active.pruned = True
            step = new[-1]
            print(f"trial {active.trial.number} pruned at {step:,} env steps (best validation {points[step]:.1f} "
                  f"trails the median of earlier trials there); stopping its run", flush=True)
            active.run.stop(f"pruned by `rlfleet sweep` at {step} env steps")

    def _finish(self, active: Active, code: int | None) -> None:
        from optuna.trial import TrialState

        del self.running[active.trial.number]
        trial, run = active.trial, active.run
        left = run.leftovers()  # a service its `rlfleet up` left behind, if any
        if left:
            print(f"trial {trial.number}: stopped {len(left)} processes its run left behind: {'; '.join(left)}",
                  flush=True)
        outcome = trial_outcome(run)
        run_dir = run.run_dir
        trial.set_user_attr("run_dir", None if run_dir is None else str(run_dir))
        trial.set_user_attr("env_steps", outcome.env_steps)
        trial.set_user_attr("run_state", outcome.state)
        number = trial.number
        if outcome.state in SCORED_STATES:
            self._report(active, ended=True)  # the whole curve, which later trials are compared with
            result = score(outcome, self.spec.objective)
            trial.set_user_attr("score", result.note)
            self.study.tell(trial, result.value)
            print(f"trial {number} complete: {_value(result.value)} ({result.note}); {outcome.env_steps:,} env steps",
                  flush=True)
        elif active.pruned:
            self.study.tell(trial, state=TrialState.PRUNED)
            print(f"trial {number} pruned: run {outcome.state} at {outcome.env_steps:,} env steps", flush=True)
        elif self.interrupted:
            self._requeue(trial.number, trial.params)
            self.study.tell(trial, state=TrialState.FAIL)
            print(f"trial {number} stopped with the sweep; queued to run again", flush=True)
        else:
            error = f"rlfleet up exited {code}, run {outcome.state}: {run.log_tail()}"
            trial.set_user_attr("error", error)
            self.study.tell(trial, state=TrialState.FAIL)
            print(f"trial {number} failed: {error}", flush=True)

    def _requeue(self, number: int, params: dict[str, Any]) -> None:
        """Queue a trial's settings to run again, once (its retry may be queued already by an earlier start)."""
        if any(t.user_attrs.get(RETRY_OF) == number for t in self.study.get_trials(deepcopy=False)):
            return
        self.study.enqueue_trial(params, user_attrs={RETRY_OF: number})

    # ----- resuming -----------------------------------------------------------------------------------------
    def recover(self) -> None:
        """Trials a dead sweep left RUNNING: stop whatever is left of their runs, mark them failed, queue their
        settings again. (No sweep is running on this study now: this one holds the output directory's lock.)"""
        from optuna.trial import TrialState

        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            attrs = frozen.user_attrs
            left = len(end_group(int(attrs["pgid"]), int(attrs["since"]))) if "pgid" in attrs else 0
            self._requeue(frozen.number, frozen.params)
            self.study.tell(frozen.number, state=TrialState.FAIL)
            stopped = f"; stopped {left} of its processes still running" if left else ""
            print(f"trial {frozen.number} was left running by an earlier sweep: marked failed and queued to run "
                  f"again{stopped}", flush=True)


def _value(value: float) -> str:
    return "no test" if math.isinf(value) else f"{value:,.1f}"


def open_study(sweep: Sweep) -> Any:
    """The study of the spec's name in its storage, created or loaded; refused if it was started with another
    direction or search space (its trials would not be comparable)."""
    optuna = require("optuna", "sweep", "rlfleet sweep")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the driver prints its own line per trial
    spec = sweep.spec
    sampler = optuna.samplers.TPESampler(seed=spec.sampler.seed, n_startup_trials=spec.sampler.startup_trials)
    pruner = (optuna.pruners.NopPruner() if spec.pruner.kind == "none" else
              optuna.pruners.MedianPruner(n_startup_trials=spec.pruner.startup_trials,
                                          n_warmup_steps=spec.pruner.warmup_env_steps))
    study = optuna.create_study(storage=sweep.storage, study_name=spec.study, direction=spec.direction,
                                sampler=sampler, pruner=pruner, load_if_exists=True)
    space = json.dumps({k: v.model_dump() for k, v in spec.space.items()}, sort_keys=True)
    known = study.user_attrs.get("space")
    if known is None:
        study.set_user_attr("space", space)
        study.set_user_attr("objective", spec.objective.model_dump())
    elif known != space or study.user_attrs.get("objective") != spec.objective.model_dump():
        raise UserError(f"study {spec.study!r} in {sweep.storage} was started with another search space or "
                        f"objective ({known}): give this spec another study name (or output_dir), or restore "
                        f"the spec it was started with")
    return study


def run_sweep(sweep: Sweep) -> int:
    """Run the study to its total and write its outputs: 0 when done, 1 when no trial produced a score, 130 when
    stopped by SIGTERM or Ctrl-C (start it again to continue)."""
    require("optuna", "sweep", "rlfleet sweep")
    sweep.output_dir.mkdir(parents=True, exist_ok=True)
    with exclusive(sweep.output_dir / "sweep.lock"):
        study = open_study(sweep)
        driver = Driver(sweep, study)
        driver.recover()
        started = time.monotonic()
        code = driver.run()
        paths = write_report(sweep, study)
        print(f"sweep {sweep.spec.study}: {settled(study.get_trials(deepcopy=False))} of {sweep.spec.trials} "
              f"trials settled in {time.monotonic() - started:.0f}s; {', '.join(str(p) for p in paths)}", flush=True)
    if code == EXIT_DONE and not any(t.value is not None and not math.isinf(t.value)
                                     for t in study.get_trials(deepcopy=False) if t.values):
        return EXIT_NO_RESULT
    return code


def sweep_command(spec_path: Path) -> int:
    """`rlfleet sweep SPEC.yaml`: the spec checked in full (UserError, exit 2, before any trial), then the study."""
    from rlfleet.launcher.sweep_spec import load_sweep

    return run_sweep(load_sweep(spec_path))
