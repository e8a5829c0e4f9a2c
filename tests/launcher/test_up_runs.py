"""`rlfleet up` names its run for the coordinator through RLFLEET_RUN: a new one each time, or `--resume`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from coordinator.journal import Journal
from launcher.cli import app
from launcher.up import Up, UpOptions
from shared.layout import RunLayout
from tests.conftest import REPO

CONFIG = REPO / "configs/cartpole_dqn.yaml"


def test_a_new_up_names_a_new_run_of_config_and_seed(tmp_path: Path) -> None:
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0, overrides=["seed=3"]))
    assert up.run_name.startswith("cartpole-dqn__s3__")
    coordinator = up.services["coordinator"].env
    assert coordinator["RLFLEET_RUN"] == up.run_name and coordinator["RLFLEET_OVERRIDES"] == "seed=3"


def test_resume_serves_the_named_run(tmp_path: Path) -> None:
    journal = Journal(RunLayout(tmp_path, "mine").journal)
    journal.close()
    up = Up(UpOptions(config=CONFIG, resume="mine", data_dir=tmp_path, port=0))
    assert up.run_name == "mine" and up.services["coordinator"].env["RLFLEET_RUN"] == "mine"


def test_resume_of_an_unknown_run_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["up", "--data-dir", str(tmp_path), "--resume", "nope"])
    assert result.exit_code == 2
    assert "no run 'nope' to resume" in result.output
