"""The command table: every command of `rlfleet`, and nothing heavy loaded before a command runs."""

from __future__ import annotations

import subprocess
import sys

from typer.main import get_command
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from tests.support.repo import REPO

COMMANDS = {"up", "coordinator", "collector", "learner", "evaluator", "store-init", "secrets", "health", "status",
            "test", "record", "export", "ctl", "runs", "plot", "configs", "config", "report", "dataset", "pbt",
            "sweep"}


def test_the_table_declares_every_command() -> None:
    group = get_command(app)
    assert set(group.commands) == COMMANDS  # type: ignore[attr-defined]
    ctl = group.commands["ctl"]  # type: ignore[attr-defined]
    assert set(ctl.commands) == {"pause", "resume", "checkpoint", "evaluate", "set", "load-checkpoint", "stop"}
    assert set(group.commands["config"].commands) == {"show", "schema"}  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and all(name in result.output for name in COMMANDS)


def test_loading_the_table_imports_no_service_and_no_heavy_library() -> None:
    """A collector's process reads the table first: what it imports then, every service pays at start-up."""
    heavy = ["numpy", "torch", "gymnasium", "pydantic", "yaml", "uvicorn", "fastapi", "coordinator",
             "collector_worker", "learner_worker", "evaluator"]
    done = subprocess.run([sys.executable, "-c", "import sys, launcher.cli; print(sorted({m.split('.')[0] for m in "
                           f"sys.modules}} & set({heavy!r})))"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
