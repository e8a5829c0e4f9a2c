"""Running the real `rlfleet` command as a user would, and what a user error must look like: one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.repo import REPO


def rlfleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rlfleet.launcher", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL)


def one_line_exit_2(done: subprocess.CompletedProcess[str], lines: int = 1) -> list[str]:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    printed = done.stderr.splitlines()
    assert len(printed) == lines, done.stderr
    return printed
