"""Learning-curve PNG from a run's metrics.csv and evaluations.csv (also `rlfleet plot RUN_DIR`)."""

from __future__ import annotations

import csv

from shared.layout import RunLayout


def _read(path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def plot_learning_curve(layout: RunLayout) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [r for r in _read(layout.metrics_csv) if r.get("recent_return_mean")]
    evals = _read(layout.evaluations_csv)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if metrics:
        ax.plot([int(r["env_steps"]) for r in metrics], [float(r["recent_return_mean"]) for r in metrics],
                label="training return (last 100 episodes)", color="tab:blue", alpha=0.7)
    if evals:
        ax.errorbar([int(r["env_steps"]) for r in evals], [float(r["mean"]) for r in evals],
                    yerr=[float(r["std"]) for r in evals], fmt="o-", ms=3, color="tab:orange",
                    label="greedy evaluation mean ± std")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(f"rlfleet run {layout.run_name}")
    ax.grid(alpha=0.3)
    if metrics or evals:
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(layout.curve_png, dpi=100)
    plt.close(fig)
