"""examples/custom_env/: a user's env package beside its config trains with `rlfleet up` run in that directory (no
PYTHONPATH entry for it, no install), and its compose override merges with docker-compose.yml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.repo import REPO

EXAMPLE = REPO / "examples" / "custom_env"


def _env_without_the_example() -> dict[str, str]:
    """The test's environment with PYTHONPATH reduced to what imports rlfleet itself: the example's directory is on
    the services' import path only because `rlfleet up` runs them there."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.mark.slow
def test_the_example_env_trains_to_its_threshold_from_its_own_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(EXAMPLE, work)
    done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", "up", "--config", "corridor.yaml",
                           "--data-dir", str(tmp_path / "data"), "--port", "0"], cwd=work,
                          env=_env_without_the_example(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "run solved" in done.stdout + done.stderr


def test_a_module_that_does_not_import_is_named_with_the_import_path(tmp_path: Path) -> None:
    config = yaml.safe_load((EXAMPLE / "corridor.yaml").read_text())
    config["env"]["id"] = "no_such_corridor:Corridor"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", "up", "--config", "broken.yaml",
                           "--data-dir", str(tmp_path / "data"), "--port", "0"], cwd=tmp_path,
                          env=_env_without_the_example(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "cannot import module 'no_such_corridor'" in out and str(tmp_path) in out  # where it looked


def test_the_compose_override_mounts_the_example_into_every_service_that_runs_envs() -> None:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed (scripts/test.sh installs Debian's)")
    done = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "-f",
                           "examples/custom_env/docker-compose.override.yml", "config"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=True)
    services = yaml.safe_load(done.stdout)["services"]
    for name in ("coordinator", "collector", "learner", "evaluator"):
        service = services[name]
        assert service["environment"]["PYTHONPATH"] == "/user"
        assert service["environment"]["RLFLEET_CONFIG"] == "/user/corridor.yaml"
        mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in service["volumes"]]
        assert any(m.startswith(f"{EXAMPLE}:/user") for m in mounts), mounts
