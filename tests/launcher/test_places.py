"""Where services run: container names and compose settings, or local paths and values, asked of a place."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlfleet.launcher.places import InContainers, OnThisHost
from rlfleet.launcher.services import DATA, SCOPE_TOKENS, TOKENS


def test_in_containers_names_mounts_and_defers_settings_to_compose() -> None:
    at = InContainers()
    assert at.path(DATA, "x") == "/data/x" and at.path(TOKENS, "tokens.json") == "/secrets/all/tokens.json"
    assert at.path(SCOPE_TOKENS["learner"], "token") == "/secrets/learner/token"
    assert at.rlfleet("health", "u") == ["rlfleet", "health", "u"]
    assert at.setting("RLFLEET_RUN", "", "why") == "${RLFLEET_RUN:-}"
    assert at.setting("RLFLEET_RUN", "") == "${RLFLEET_RUN:-}"  # asked again with the same default: fine
    assert list(at.settings) == ["RLFLEET_RUN"] and at.settings["RLFLEET_RUN"].why == "why"
    with pytest.raises(ValueError, match="RLFLEET_RUN has two defaults"):
        at.setting("RLFLEET_RUN", "other")


def test_on_this_host_maps_volumes_into_the_data_directory_and_reads_its_values(tmp_path: Path) -> None:
    at = OnThisHost(tmp_path / "d", tmp_path / "r", 1234, {"RLFLEET_RUN": "mine", "RLFLEET_OVERRIDES": ""})
    assert at.path(DATA) == str(tmp_path / "d")
    assert at.path(TOKENS, "tokens.json") == str(tmp_path / "d/tokens.json")  # where `rlfleet status` looks
    assert at.path(SCOPE_TOKENS["learner"], "token") == str(tmp_path / "d/secrets/learner/token")
    assert (at.coordinator_url, at.bind_host, at.repo) == ("http://127.0.0.1:1234", "127.0.0.1", str(tmp_path / "r"))
    assert at.rlfleet("secrets") == [sys.executable, "-m", "rlfleet.launcher", "secrets"]
    assert at.setting("RLFLEET_RUN", "") == "mine"
    assert at.setting("RLFLEET_OVERRIDES", "d") == "d"  # empty counts as unset, as compose's `:-` has it
    assert at.setting("RLFLEET_CONFIG", "c") == "c"
