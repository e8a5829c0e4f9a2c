"""A command's set-up: field docs off in this process and in the processes it starts, or on for a schema."""

from __future__ import annotations

import os

import pytest

from rlfleet import shared
from rlfleet.launcher.startup import with_field_docs, without_field_docs


def test_without_field_docs_reaches_this_process_and_its_children(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "FIELD_DOCS", True)
    monkeypatch.setenv("RLFLEET_FIELD_DOCS", "1")
    without_field_docs()
    assert shared.FIELD_DOCS is False and os.environ["RLFLEET_FIELD_DOCS"] == "0"


def test_with_field_docs_turns_them_on_where_an_inherited_setting_turned_them_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "FIELD_DOCS", False)
    with_field_docs()
    assert shared.FIELD_DOCS is True
