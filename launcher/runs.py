"""`rlfleet runs`: the runs of a data directory, from their journals (read-only, so live runs too), each with what
'solved' means for it (its threshold, a battle rule, or "no threshold": a run that trains to its budget). A solved
run shows the test that confirmed it with its interval, the bound the solve rule used and the rule's name, so a
"solved" in the list says as much as the coordinator's verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlfleet.coordinator.journal.database import stored_meta
from rlfleet.shared.storage.layout import RunLayout


@dataclass(frozen=True)
class RunRow:
    name: str
    state: str
    env_steps: int | None
    best_test: float | None  # the best held-out test mean (a confirming one solved the run)
    tests: int
    changed: int  # live setting changes: a run with any is not reproducible
    threshold: str  # what 'solved' means: the threshold, "battle rule", or "no threshold" (trains to its budget)
    confirmed_by: str | None = None  # the confirming test, its interval, bound and rule, in words


def list_runs(data_dir: Path) -> list[RunRow]:
    runs_dir = data_dir / "runs"
    rows = []
    for run_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else ():
        meta = stored_meta(RunLayout(data_dir, run_dir.name).journal, "lifecycle", "data", "judge", "control",
                           "config")
        held = (meta.get("judge") or {}).get("tests", [])
        tests = [t["mean"] for t in held]
        rows.append(RunRow(
            name=run_dir.name, state=meta["lifecycle"]["state"] if "lifecycle" in meta else "no journal",
            env_steps=meta["data"]["env_steps"] if "data" in meta else None,
            best_test=max(tests) if tests else None, tests=len(tests), threshold=_threshold(meta.get("config")),
            changed=len((meta.get("control") or {}).get("changes", [])),
            confirmed_by=next((confirmation(t) for t in held if t.get("confirmed")), None)))
    return rows


def confirmation(test: dict[str, Any]) -> str:
    """A confirming held-out test as journalled (HoldoutResult's JSON, of any version of rlfleet)."""
    low, high = test["ci95"]
    bound = "" if test.get("bound") is None else f", re-test bound {test['bound']:.1f}"
    rule = test.get("rule") or ("against" if test.get("battles") else "mean_at_threshold")
    return f"v{test['policy_version']} {test['mean']:.1f} [{low:.1f}, {high:.1f}]{bound} ({rule})"


def _threshold(config: dict | None) -> str:
    """The solve rule of a journalled config (resolved when the run started: a number or null)."""
    if config is None:
        return "-"
    if (config.get("evaluation") or {}).get("against"):
        return "battle rule"
    threshold = (config.get("env") or {}).get("solve_threshold")
    return "no threshold" if threshold is None else f"{threshold:g}"


def format_runs(rows: list[RunRow]) -> str:
    if not rows:
        return "no runs"
    width = max(len(r.name) for r in rows)
    lines = [f"{'run':{width}}  {'state':16} {'env steps':>10}  {'best test':>9}  tests  settings changed  "
             f"threshold     confirmed by (test mean [95% t interval], re-test bound (rule))"]
    for r in rows:
        steps = "-" if r.env_steps is None else f"{r.env_steps:,}"
        best = "-" if r.best_test is None else f"{r.best_test:.1f}"
        lines.append(f"{r.name:{width}}  {r.state:16} {steps:>10}  {best:>9}  {r.tests:5}  {r.changed:16}  "
                     f"{r.threshold:12}  {r.confirmed_by or '-'}")
    return "\n".join(lines)
