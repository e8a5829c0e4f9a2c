"""`rlfleet up` stops its services in order however many times it is told to: a second SIGTERM (as `timeout`
passes on after a shell's) used to cut the shutdown short and leave the coordinator running without a parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import alive, descendants
from tests.support.repo import REPO


@pytest.mark.slow
def test_repeated_sigterms_still_stop_every_service(tmp_path: Path) -> None:
    up = subprocess.Popen([sys.executable, "-m", "rlfleet.launcher", "up", "--config", "configs/cartpole_dqn.yaml",
                           "--data-dir", str(tmp_path), "--port", "0"], cwd=REPO, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert up.stdout is not None
        for line in up.stdout:  # the services are up once the coordinator's address is printed
            if line.startswith("coordinator on"):
                break
        services = descendants(up.pid)
        assert len(services) >= 5, services  # coordinator, 2 collectors, learner, evaluator
        for _ in range(3):
            up.send_signal(signal.SIGTERM)
            time.sleep(0.05)
        assert up.wait(timeout=60) != 0  # interrupted: not solved
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in services):
            time.sleep(0.1)
        assert not [pid for pid in services if alive(pid)]
    finally:
        for pid in descendants(up.pid):
            os.kill(pid, signal.SIGKILL)
        up.kill()
