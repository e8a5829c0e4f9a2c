"""`rlfleet secrets --scope-file`: one scope's token alone per file, for compose's per-service volumes."""

from __future__ import annotations

import stat
from pathlib import Path

from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.shared.tokens import load_token_file, load_tokens_file


def test_scope_files_hold_only_their_scopes_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["secrets", "--out", str(tmp_path / "all/tokens.json"),
                                      "--scope-file", f"collector={tmp_path}/collector/token",
                                      "--scope-file", f"learner={tmp_path}/learner/token"])
    assert result.exit_code == 0, result.output
    tokens = load_tokens_file(tmp_path / "all/tokens.json")
    for scope in ("collector", "learner"):
        path = tmp_path / scope / "token"
        assert load_token_file(path) == tokens[scope]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not any(token in result.output for token in tokens.values())  # tokens are never printed


def test_bad_scope_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    for bad in ("root=/x", "collector", "collector="):
        result = CliRunner().invoke(app, ["secrets", "--out", str(tmp_path / "tokens.json"), "--scope-file", bad])
        assert result.exit_code == 2 and "SCOPE=PATH" in result.output
    assert not (tmp_path / "tokens.json").exists()
