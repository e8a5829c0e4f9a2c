"""`rlfleet store-init` with nothing to create, or a store URL it cannot use (the s3 profile's job; a real
bucket is created in tests/shared/storage/test_s3.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rlfleet.launcher.cli import app


def test_no_store_url_means_nothing_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLFLEET_STORE_URL", "")
    result = CliRunner().invoke(app, ["store-init"])
    assert result.exit_code == 0 and "nothing to create" in result.output


def test_a_store_url_it_cannot_use_is_exit_2_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLFLEET_STORE_URL", "ftp://bucket/x")
    result = CliRunner().invoke(app, ["store-init"])
    assert result.exit_code == 2
    assert result.stderr.startswith("rlfleet store-init: RLFLEET_STORE_URL='ftp://bucket/x'")
