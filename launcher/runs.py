"""`rlfleet runs`: the runs of a data directory, from their journals (read-only, so live runs too), each with what
'solved' means for it: its threshold, a battle rule, or "no threshold" (a run that trains to its budget)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coordinator.journal.database import stored_meta
from shared.storage.layout import RunLayout


@dataclass(frozen=True)
class RunRow:
    name: str
    state: str
    env_steps: int | None
    best_test: float | None  # the best held-out test mean (a confirming one solved the run)
    tests: int
    changed: int  # live setting changes: a run with any is not reproducible
    threshold: str  # what 'solved' means: the threshold, "battle rule", or "no threshold" (trains to its budget)


def list_runs(data_dir: Path) -> list[RunRow]:
    runs_dir = data_dir / "runs"
    rows = []
    for run_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else ():
        meta = stored_meta(RunLayout(data_dir, run_dir.name).journal, "lifecycle", "data", "judge", "control",
                           "config")
        tests = [t["mean"] for t in (meta.get("judge") or {}).get("tests", [])]
        rows.append(RunRow(
            name=run_dir.name, state=meta["lifecycle"]["state"] if "lifecycle" in meta else "no journal",
            env_steps=meta["data"]["env_steps"] if "data" in meta else None,
            best_test=max(tests) if tests else None, tests=len(tests), threshold=_threshold(meta.get("config")),
            changed=len((meta.get("control") or {}).get("changes", []))))
    return rows


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
    lines = [f"{'run':{width}}  {'state':16} {'env steps':>10}  {'best test':>9}  tests  settings changed  threshold"]
    for r in rows:
        steps = "-" if r.env_steps is None else f"{r.env_steps:,}"
        best = "-" if r.best_test is None else f"{r.best_test:.1f}"
        lines.append(f"{r.name:{width}}  {r.state:16} {steps:>10}  {best:>9}  {r.tests:5}  {r.changed:16}  "
                     f"{r.threshold}")
    return "\n".join(lines)
