"""The coordinator process never loads torch or gymnasium: it handles metadata only, and each would cost it
hundreds of MiB and seconds of start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.repo import REPO


def test_coordinator_with_its_metrics_recorder_imports_no_torch_or_gymnasium(tmp_path: Path) -> None:
    script = f"""
import sys
from pathlib import Path
from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.observe.metrics import MetricsRecorder
from rlfleet.shared.storage.layout import RunLayout
recorder = MetricsRecorder(RunLayout(Path({str(tmp_path)!r}), "r"))
recorder._tb.add_scalar("x", 1.0, 0)
recorder.close()
print(sorted(m for m in ("torch", "gymnasium", "matplotlib") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert any((tmp_path / "runs" / "r" / "tb").iterdir())  # the events were still written
