"""`rlfleet plot`: a run's learning curve redrawn from its files."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlfleet.coordinator.journal.database import Journal
from rlfleet.launcher.cli import app
from rlfleet.shared.storage.layout import RunLayout


def test_the_curve_is_drawn_into_the_run_directory(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    Journal(layout.journal).close()  # a run that has recorded nothing yet still gets its (empty) axes
    result = CliRunner().invoke(app, ["plot", str(layout.run_dir)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(layout.curve_png)
    assert layout.curve_png.read_bytes().startswith(b"\x89PNG")
