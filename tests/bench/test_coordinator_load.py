"""Smoke test of bench/coordinator_load.py: five simulated collectors against a real coordinator for 3 s."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_coordinator_load", REPO / "bench" / "coordinator_load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_five_collectors_are_acknowledged_without_errors(tmp_path: Path) -> None:
    bench = _load_bench()
    out = tmp_path / "load.json"
    rc = bench.main(["--sweep", "5", "--seconds", "3", "--warmup", "2", "--publishes", "2", "--chunk-interval", "0.2",
                     "--workdir", str(tmp_path), "--json", str(out)])
    doc = json.loads(out.read_text())
    (point,) = doc["points"]
    assert point["collectors_ready"] == 5
    assert point["acked_chunks_in_window"] > 0, point
    assert point["errors"] == 0, point["error_examples"]
    assert not point["setup_errors"] and not point["warmup_errors"], point["error_examples"]
    assert point["healthz_latency"]["n"] > 0 and point["sample_ok"] + point["sample_not_enough_data"] > 0
    assert point["propagation"]["complete"] == 2, point["propagation"]
    assert point["coordinator_cpu_ms_per_chunk"] is not None
    assert rc == 0, point["fail_reasons"]


def test_paused_collectors_wait_in_long_polls_and_the_resume_reaches_them_all(tmp_path: Path) -> None:
    bench = _load_bench()
    out = tmp_path / "paused.json"
    rc = bench.main(["--paused", "--sweep", "5", "--seconds", "3", "--warmup", "1", "--publishes", "1",
                     "--workdir", str(tmp_path), "--json", str(out)])
    (point,) = json.loads(out.read_text())["points"]
    assert point["paused"] and point["collectors_ready"] == 5
    assert point["acked_chunks_total"] == 0  # nothing collected while paused
    # held until the resume, not re-checked every pause_seconds (that would be 5 x 20 polls a second)
    assert point["pause_polls_per_second"] < 5, point["pause_polls_per_second"]
    assert point["resume"]["complete"] and point["resume"]["propagation_ms"] < 1000, point["resume"]
    assert point["errors"] == 0, point["error_examples"]
    assert rc == 0, point["fail_reasons"]
