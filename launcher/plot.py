"""`rlfleet plot`: (re)draw a run's learning curve from its metrics, e.g. after copying a run directory."""

from __future__ import annotations

from pathlib import Path


def plot(run_dir: Path) -> Path:
    """Draw RUN_DIR/learning_curve.png; returns its path."""
    from rlfleet.coordinator.observe.curves import plot_learning_curve
    from rlfleet.shared.storage.layout import RunLayout

    layout = RunLayout(run_dir.parent.parent, run_dir.name)
    plot_learning_curve(layout)
    return layout.curve_png
