"""docker/e2e.sh in CI: rlfleet built into a real image and run by docker-compose, as a user would.

The script installs and starts what it needs (Debian's docker.io, docker-compose, debootstrap; its own dockerd)
and fails with the exact error when an engine cannot start: this test never skips. With the base image cached
(RLFLEET_DOCKER_CACHE) it takes about two minutes; on a fresh machine about five (docs/deployment/compose.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.repo import REPO


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_compose_in_containers_solves_scales_survives_a_learner_crash_and_starts_fresh_runs() -> None:
    # The wheelhouse's Python (3.11). No `rlfleet up` run for comparison: a CI machine's figure would mean little,
    # and tests/integration/test_up.py trains the same run. In CI the image was built beside the fast tests
    # (scripts/test.sh: docker/e2e.sh --build-only), so this finds it cached.
    env = {**os.environ, "PYTHON": sys.executable, "RLFLEET_E2E_COMPARE": "0"}
    done = subprocess.run(["bash", str(REPO / "docker/e2e.sh")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=880, stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    print(out)
    assert done.returncode == 0, out[-6000:]
    # Three collectors, each with chunks in the buffer, read from /v1/status with the read token.
    (collectors,) = re.findall(r"== status: (.*)", out)
    assert len(re.findall(r"\d+ chunks", collectors)) >= 3
    assert all(int(n) > 0 for n in re.findall(r"(\d+) chunks", collectors))
    # The SIGKILLed learner was restarted by Docker's policy and resumed from its checkpoint.
    restarted = re.search(r"learner restarted by its policy \(RestartCount (\d+)\): resumed from iteration (\d+)", out)
    assert restarted and int(restarted.group(1)) >= 1 and int(restarted.group(2)) > 0
    assert re.search(r"== run \S+ solved: policy v\d+ confirmed by a held-out test", out), out[-3000:]
    # Both trackers of the image's extras wrote the first run's scalars inside the coordinator's container.
    trackers = re.search(r"== trackers: wandb (\d+) scalars, mlflow (\d+) scalars|== trackers: mlflow (\d+) scalars, "
                         r"wandb (\d+) scalars", out)
    assert trackers and all(int(n) > 0 for n in trackers.groups() if n is not None), out[-3000:]
    first = re.search(r"== run (\S+) is collecting", out)
    second = re.search(r"== new run (\S+) is training", out)
    assert first and second and first.group(1) != second.group(1)  # a second `up` after the solve: a new run
    assert re.search(rf"== run {re.escape(second.group(1))} solved: [\d,]+ env steps", out)
    # A learner group of 2 in containers: both ranks held their tasks, joined one group, trained and published.
    formed = re.search(r"== group formed \(.*\): (learner-0 held by \S+), (learner-1 held by \S+)", out)
    assert formed, out[-3000:]
    trained = re.search(r"== learner group trained: (\d+) updates, policy v(\d+)", out)
    assert trained and int(trained.group(1)) >= 300 and int(trained.group(2)) >= 3
    for figure in ("base image", "project image", "solve in containers", "learner group of 2 in containers"):
        assert re.search(rf"^{figure}: [\d.]+s", out, re.MULTILINE), f"no figure for {figure}"
    assert re.search(r"^solve with rlfleet up: not measured \(RLFLEET_E2E_COMPARE=0\)", out, re.MULTILINE)
    # stdout's last line: stderr comes after it in `out`, and apt's needrestart may warn there on a fresh machine
    assert done.stdout.rstrip().endswith("e2e passed")
