"""`rlfleet coordinator` refuses a store setting it cannot use with exit 2 and the setting's name, before it
serves anything (compose's `restart: on-failure` then shows the line in the service's log)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.shared.tokens import generate_tokens_file
from tests.support.repo import REPO


def test_a_wrong_store_url_is_exit_2_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate_tokens_file(tmp_path / "tokens.json")
    for name, value in {"RLFLEET_DATA_DIR": str(tmp_path), "RLFLEET_TOKENS_FILE": str(tmp_path / "tokens.json"),
                        "RLFLEET_CONFIG": str(REPO / "configs/cartpole_dqn.yaml"),
                        "RLFLEET_STORE_URL": "ftp://bucket/x"}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["coordinator"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("rlfleet coordinator: RLFLEET_STORE_URL='ftp://bucket/x'")
