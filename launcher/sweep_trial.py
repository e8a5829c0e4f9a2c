"""What a sweep's trial ran and how it ended, read from its run's journal: the coordinator's record of the run,
read-only while the run goes on. The validation curve feeds the pruner; once the run ends, its state, held-out tests
and env steps give the trial's score. The trial's `rlfleet up` itself is a ChildRun (launcher/child_run.py).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlfleet.coordinator.journal.database import stored_meta
from rlfleet.launcher.child_run import ChildRun
from rlfleet.shared.storage.layout import RunLayout


@dataclass(frozen=True)
class Validation:
    env_steps: int
    mean: float
    policy_version: int


@dataclass(frozen=True)
class Outcome:
    """How a trial's run ended, from its journal."""

    state: str  # solved, budget_exhausted, stopped, failed, ... ("no journal" when the run never started)
    env_steps: int
    wall_seconds: float
    tests: list[dict[str, Any]]  # the journal's held-out tests (HoldoutResult JSON)
    best_version: int | None  # the best validated version (the run's best/ policy)
    config: dict[str, Any]  # the config the run resolved and started with


def trial_journal(run: ChildRun) -> Path | None:
    """The journal of the trial's run once `rlfleet up` has created the run (None before)."""
    run_dir = run.run_dir
    return None if run_dir is None else RunLayout(run_dir.parent.parent, run_dir.name).journal


def trial_validations(run: ChildRun) -> list[Validation]:
    journal = trial_journal(run)
    return [] if journal is None else read_validations(journal)


def trial_outcome(run: ChildRun) -> Outcome:
    journal = trial_journal(run)
    return Outcome("no journal", 0, 0.0, [], None, {}) if journal is None else read_outcome(journal)


def read_validations(journal: Path) -> list[Validation]:
    """The run's validations so far (env steps, mean), in the order reported; read-only, so the run goes on."""
    if not journal.exists():
        return []
    db = sqlite3.connect(f"{journal.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT body FROM evaluations ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the coordinator has not created its tables yet
        return []
    finally:
        db.close()
    return [Validation(int(body["env_steps"]), float(body["mean"]), int(body["policy_version"]))
            for body in (json.loads(r[0]) for r in rows)]


def read_outcome(journal: Path) -> Outcome:
    meta = stored_meta(journal, "lifecycle", "data", "judge", "config")
    lifecycle = meta.get("lifecycle") or {}
    validations = read_validations(journal)
    # the judge's best (coordinator/state/judge.py): the first validation of the highest mean
    best = max(validations, key=lambda v: v.mean, default=None)
    return Outcome(state=lifecycle.get("state", "no journal"), env_steps=(meta.get("data") or {}).get("env_steps", 0),
                   wall_seconds=float(lifecycle.get("ended_elapsed") or lifecycle.get("elapsed") or 0.0),
                   tests=(meta.get("judge") or {}).get("tests", []),
                   best_version=None if best is None else best.policy_version,
                   config=meta.get("config") or {})

