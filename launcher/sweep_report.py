"""A sweep's outputs, rewritten from its study whenever the sweep ends (done or stopped): `trials.md` and
`trials.csv` (one row per trial: number, state, settings, objective, env steps, run directory), `best_config.yaml`
(the base config with the best trial's settings, a run config itself: `rlfleet up --config best_config.yaml`)
and `sweep.png` (the objective per trial, and each setting against the objective).

Everything comes from the study's storage, so the outputs of a resumed sweep cover the trials of every start.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from rlfleet.launcher.config_command import MODELINE_PREFIX, schema_text
from rlfleet.launcher.configs import read_config
from rlfleet.launcher.spec_files import override
from rlfleet.launcher.sweep_spec import Sweep
from rlfleet.shared.config.run_config import dump_run_config
from rlfleet.shared.extras import require

SCHEMA_FILE = "run-config.schema.json"  # written beside best_config.yaml, which names it in its modeline


def rows(sweep: Sweep, trials: list[Any]) -> list[dict[str, str]]:
    keys = list(sweep.spec.space)
    retried = {t.user_attrs["retry_of"]: t.number for t in trials if "retry_of" in t.user_attrs}
    table = []
    for t in trials:
        steps = t.user_attrs.get("env_steps")
        table.append({"number": str(t.number), "state": t.state.name.lower(),
                      **{k: _setting(t.params.get(k)) for k in keys},
                      "objective": _objective(t), "env_steps": "" if steps is None else str(steps),
                      "note": _note(t, retried.get(t.number)), "run_dir": t.user_attrs.get("run_dir") or ""})
    return table


def _objective(trial: Any) -> str:
    """A complete trial's score. A pruned trial has none: the value Optuna keeps for it is its last validation
    point, which must not read as a score."""
    if trial.state.name != "COMPLETE" or trial.value is None:
        return ""
    return "no test" if math.isinf(trial.value) else f"{trial.value:.6g}"


def _note(trial: Any, retry: int | None) -> str:
    """What the score is, or why there is none."""
    notes = [trial.user_attrs.get("score") or trial.user_attrs.get("error") or ""]
    if trial.state.name == "PRUNED" and trial.intermediate_values:
        step = max(trial.intermediate_values)
        notes.append(f"pruned at {step:,} env steps: its validation curve trailed the median")
    if "retry_of" in trial.user_attrs:
        notes.append(f"re-runs trial {trial.user_attrs['retry_of']}")
    if retry is not None:
        notes.append(f"left unfinished by a stopped sweep; re-run as trial {retry}")
    return "; ".join(n for n in notes if n)


def _setting(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def best_trial(study: Any) -> Any | None:
    """The best complete trial with a score (a trial with no test scores -inf and is never the best); of equal
    scores (CartPole's tests are often all 500) the one that used fewer env steps."""
    from optuna.trial import TrialState

    scored = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.value is not None and not math.isinf(t.value)]
    if not scored:
        return None
    sign = 1 if study.direction.name == "MAXIMIZE" else -1
    return max(scored, key=lambda t: (sign * t.value, -t.user_attrs.get("env_steps", 0)))


def write_report(sweep: Sweep, study: Any) -> list[Path]:
    """Write the outputs into the sweep's output directory; the paths written."""
    out = sweep.output_dir
    trials = study.get_trials(deepcopy=False)
    table = rows(sweep, trials)
    best = best_trial(study)
    written = [_write_csv(out / "trials.csv", table), _write_markdown(out / "trials.md", sweep, table, best)]
    if best is not None:
        written.append(_write_best_config(out, sweep, best))
    written.append(_write_plot(out / "sweep.png", sweep, trials))
    return written


def _write_csv(path: Path, table: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="") as fh:
        if table:
            writer = csv.DictWriter(fh, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
    return path


def _write_markdown(path: Path, sweep: Sweep, table: list[dict[str, str]], best: Any | None) -> Path:
    spec = sweep.spec
    objective = "held-out test score, maximized" if spec.objective.kind == "test" else \
        f"time to a confirmed solve in {getattr(spec.objective, 'unit', '')}, minimized"
    lines = [f"# Sweep {spec.study}", "",
             f"Base config `{sweep.base_path}`; objective: {objective}; {len(table)} trials.", ""]
    if best is not None:
        settings = ", ".join(f"`{k}={_setting(v)}`" for k, v in best.params.items())
        lines += [f"Best: trial {best.number}, {best.value:.6g} ({best.user_attrs.get('score', '')}) with {settings}.",
                  ""]
    if table:
        header = list(table[0])
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row[h].replace("|", "/") for h in header) + " |" for row in table]
    path.write_text("\n".join(lines) + "\n")
    return path


def _write_best_config(out: Path, sweep: Sweep, best: Any) -> Path:
    config = read_config(sweep.base_path, sweep.fixed + [override(k, v) for k, v in best.params.items()])
    (out / SCHEMA_FILE).write_text(schema_text())
    path = out / "best_config.yaml"
    head = (f"{MODELINE_PREFIX}{SCHEMA_FILE}\n"
            f"# The best trial ({best.number}, objective {best.value:.6g}) of sweep {sweep.spec.study}: "
            f"{sweep.base_path} with {' '.join(override(k, v) for k, v in best.params.items())}\n")
    path.write_text(head + dump_run_config(config))
    return path


def _write_plot(path: Path, sweep: Sweep, trials: list[Any]) -> Path:
    matplotlib = require("matplotlib", "sweep", "the sweep plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(sweep.spec.space)
    scored = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    finite = [t.value for t in scored if not math.isinf(t.value)]
    floor = min(finite) if finite else 0.0  # where trials with no test are drawn (marked x)
    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(5 * (1 + len(keys)), 4.2), squeeze=False)
    label = "held-out test score" if sweep.spec.objective.kind == "test" else "time to solve"
    first = axes[0][0]
    for t in scored:
        value = floor if math.isinf(t.value) else t.value
        first.scatter(t.number, value, marker="x" if math.isinf(t.value) else "o", color="C0")
    pruned = [t for t in trials if t.state.name == "PRUNED"]
    for t in pruned:
        first.axvline(t.number, color="0.85", zorder=0)
    first.set(xlabel="trial (grey: pruned)", ylabel=label, title=f"{sweep.spec.study}: objective per trial")
    for ax, key in zip(axes[0][1:], keys, strict=True):
        points = [(t.params[key], floor if math.isinf(t.value) else t.value) for t in scored if key in t.params]
        if points:
            ax.scatter([p[0] for p in points], [p[1] for p in points], color="C1")
        parameter = sweep.spec.space[key]
        if getattr(parameter, "log", False):
            ax.set_xscale("log")
        ax.set(xlabel=key, ylabel=label, title=f"{key} against the objective")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
