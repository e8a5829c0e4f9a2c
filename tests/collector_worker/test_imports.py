"""Collectors and the evaluator run policies in numpy: torch (~200 MB resident) stays out of their processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.repo import REPO


@pytest.mark.parametrize("module", ["rlfleet.collector_worker.main", "rlfleet.evaluator.main"])
def test_service_runs_without_torch(module: str) -> None:
    script = f"import sys, {module}; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
