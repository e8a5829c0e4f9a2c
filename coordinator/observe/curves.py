"""Learning-curve PNG from a run's metrics.csv, evaluations.csv and tests.csv (also `rlfleet plot RUN_DIR`).

Three panels share the y axis: returns against env steps, against wall-clock time and against learner
updates. Env steps alone mislead in a distributed run: collection runs ahead in bursts (the rate limiter
lets collectors fill the buffer, then pauses them), so many evaluations stack on a few env-step values;
wall time and updates spread them out. Held-out tests are drawn as stars (filled: confirmed). Two-player runs
add a panel of each validated version's Elo rating (coordinator/state/ratings.py) against its version number, and
leave out the validations' spread: games of +1 / 0 / -1 have a std near 1 that would hide every mean.
"""

from __future__ import annotations

import csv

from rlfleet.shared.storage.layout import RunLayout

AXES = (("env_steps", "env steps"), ("wall_seconds", "wall-clock seconds"), ("iteration", "learner updates"))


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
    evals, tests = _read(layout.evaluations_csv), _read(layout.tests_csv)
    rated = [r for r in evals if r.get("elo")]  # two-player runs: a fourth panel, Elo over policy versions
    fig, axes = plt.subplots(1, len(AXES) + bool(rated), figsize=(15 + 5 * bool(rated), 4.5))
    for ax in axes[1:len(AXES)]:
        ax.sharey(axes[0])
    for ax, (column, label) in zip(axes, AXES, strict=False):
        if metrics:
            ax.plot([float(r[column]) for r in metrics], [float(r["recent_return_mean"]) for r in metrics],
                    label="training return (last 100 episodes)", color="tab:blue", alpha=0.7)
        rows = [r for r in evals if r.get(column)]  # evaluations.csv of older runs has no iteration column
        if rows:
            ax.errorbar([float(r[column]) for r in rows], [float(r["mean"]) for r in rows],
                        yerr=None if rated else [float(r["std"]) for r in rows], fmt="o-", ms=3,
                        color="tab:orange", label="validation mean" if rated else "validation mean ± std")
        for confirmed in (True, False):
            chosen = [r for r in tests if (r["confirmed"] == "True") == confirmed]
            if chosen:
                ax.plot([float(r[column]) for r in chosen], [float(r["mean"]) for r in chosen], "*", ms=12,
                        color="tab:green" if confirmed else "tab:red", fillstyle="full" if confirmed else "none",
                        label="held-out test (confirmed)" if confirmed else "held-out test (rejected)")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("episode return")
    if rated:
        elo = axes[len(AXES)]
        elo.plot([int(r["policy_version"]) for r in rated], [float(r["elo"]) for r in rated], "o-", ms=3,
                 color="tab:purple")
        elo.axhline(0.0, color="gray", lw=0.8, ls="--")
        elo.set_xlabel("policy version")
        elo.set_ylabel("Elo (random = 0)")
        elo.grid(alpha=0.3)
    fig.suptitle(f"rlfleet run {layout.run_name}")
    if metrics or evals:
        axes[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(layout.curve_png, dpi=100)
    plt.close(fig)
