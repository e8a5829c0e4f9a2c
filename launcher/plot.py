"""`rlfleet plot`: (re)draw a run's learning curve from its metrics, e.g. after copying a run directory."""

from __future__ import annotations

from pathlib import Path


def plot(run_dir: Path) -> Path:
    """Draw RUN_DIR/learning_curve.png; returns its path. UserError for a path that is not a run directory."""
    from rlfleet.coordinator.observe.curves import plot_learning_curve
    from rlfleet.launcher.errors import UserError
    from rlfleet.shared.storage.layout import RunLayout

    run_dir = run_dir.absolute()
    layout = RunLayout(run_dir.parent.parent, run_dir.name)
    if layout.run_dir != run_dir or not layout.journal.is_file():
        raise UserError(f"{run_dir} is not a run directory (<data dir>/runs/<name> with its journal, "
                        f"{layout.journal.name}): give one as `rlfleet runs` lists them")
    plot_learning_curve(layout)
    return layout.curve_png
