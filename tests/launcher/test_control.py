"""`rlfleet ctl` without a coordinator to steer: refused with exit 2 and what to fix, before or at the call."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.up import free_port
from rlfleet.shared.tokens import generate_tokens_file


def test_a_tokens_file_without_an_admin_token_is_named(tmp_path: Path) -> None:
    (tmp_path / "tokens.json").write_text("{}")
    result = CliRunner().invoke(app, ["ctl", "pause", "--tokens-file", str(tmp_path / "tokens.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"rlfleet ctl pause: no admin token in {tmp_path / 'tokens.json'}")


def test_an_unreachable_coordinator_is_one_line_and_exit_2(tmp_path: Path) -> None:
    generate_tokens_file(tmp_path / "tokens.json")
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["ctl", "stop", "--url", url, "--tokens-file", str(tmp_path / "tokens.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"rlfleet ctl stop: cannot reach the coordinator at {url}")
    assert result.stderr.count("\n") == 1


def test_malformed_settings_are_refused_before_any_call(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ctl", "set", "novalue", "--url", f"http://127.0.0.1:{free_port()}",
                                      "--tokens-file", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "SETTINGS" in result.output
