"""The `tracking` section: what it accepts, and a tracker whose library is not installed refused where a run is
about to start (the preflight, before any service), in one line naming the extra that installs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.problems import config_problems
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.tracking import TrackingConfig, missing_tracker_extra
from tests.support.repo import REPO


def test_no_section_means_no_tracker_and_each_named_one_starts_in_order() -> None:
    assert RunConfig().tracking.names == []
    both = TrackingConfig.model_validate({"mlflow": {}, "wandb": {"tags": ["a b", "c"]}})
    assert both.names == ["wandb", "mlflow"] and both.wandb is not None and both.wandb.tags == ("a b", "c")
    assert both.mlflow is not None and both.mlflow.local and both.mlflow.experiment == "rlfleet"


@pytest.mark.parametrize("raw", [{"wandb": {"projct": "x"}}, {"wandb": {"tags": ["a,b"]}},
                                 {"wandb": {"project": "a/b"}}, {"mlflow": {"tracking_uri": ""}},
                                 {"queue_events": 10}])
def test_bad_values_are_refused_at_validation(raw: dict) -> None:
    with pytest.raises(ValidationError):
        TrackingConfig.model_validate(raw)


@pytest.mark.parametrize(("blocked", "raw", "line"), [
    ("wandb", {"wandb": {}}, "tracking.wandb needs wandb (not installed): install the wandb extra, "
                             "pip install 'rlfleet[wandb]'"),
    ("mlflow", {"mlflow": {}}, "tracking.mlflow needs mlflow (not installed): install the mlflow extra, "
                               "pip install 'rlfleet[mlflow]'"),
    ("sqlalchemy", {"mlflow": {}}, "tracking.mlflow's SQLite store needs sqlalchemy (not installed): install the "
                                   "mlflow extra, pip install 'rlfleet[mlflow]'"),
    ("sqlalchemy", {"mlflow": {"tracking_uri": "http://127.0.0.1:5000"}}, None),  # a server: no SQLite here
])
def test_a_tracker_whose_library_is_missing_is_named_with_its_extra(
        blocked: str, raw: dict, line: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)  # what an environment without it looks like to an import
    assert missing_tracker_extra(TrackingConfig.model_validate(raw)) == line


def test_the_preflight_refuses_it_naming_the_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)
    config = RunConfig.model_validate({"env": {"solve_threshold": 475}, "tracking": {"wandb": {}}})
    with pytest.raises(ValidationError) as info:
        preflight(config)
    (line,) = config_problems(info.value, RunConfig)
    assert line.startswith("tracking: tracking.wandb needs wandb (not installed): install the wandb extra")


def test_rlfleet_up_refuses_it_in_one_line_before_any_service_starts(tmp_path: Path) -> None:
    config = tmp_path / "tracked.yaml"
    config.write_text("env: {solve_threshold: 475}\ntracking: {wandb: {project: mine}}\n")
    script = ("import sys; sys.modules['wandb'] = None; from rlfleet.launcher.cli import app; "
              "app(sys.argv[1:], prog_name='rlfleet')")
    done = subprocess.run([sys.executable, "-c", script, "up", "--config", str(config), "--data-dir",
                           str(tmp_path / "data"), "--port", "0"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"rlfleet up: {config}: tracking: tracking.wandb needs wandb (not installed): install the wandb extra, "
        f"pip install 'rlfleet[wandb]' (value {{'wandb': {{'project': 'mine'}}}})"]
    assert not (tmp_path / "data" / "runs").exists()
