"""`rlfleet status` when there is no answer: exit 2 and one line naming the coordinator it tried."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.up import free_port


def test_an_unreachable_coordinator_is_one_line_and_exit_2(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["status", "--url", url, "--tokens-file", str(tmp_path / "none.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"cannot reach the coordinator at {url}: ") and result.stderr.count("\n") == 1
