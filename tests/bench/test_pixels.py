"""bench/pixels.py's parts that train nothing: the raw arms (random actions, the CNN acting), the collection path
with its consume-only learner (payload bytes per env step), the last line, and its refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import REPO, run_bench

CONFIG = REPO / "bench" / "pong_factory_ppo.yaml"
FRAME = 84 * 84


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_bench("pixels.py", *args)


@pytest.mark.slow
def test_raw_and_collection_arms_measure_and_the_last_line_reads_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "pixels.json"
    done = run("--config", str(CONFIG), "--arms", "raw_random,raw,collect", "--window", "3", "--warmup", "1",
               "--repeats", "1", "--collectors", "1", "--set", "collector.num_envs=2", "--set",
               "collector.chunk_steps=16", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert all(result["results"][arm][0] > 0 for arm in ("raw_random", "raw", "collect"))
    # payload bytes the learner read per env step: at most the 8 frames of 84x84 that obs and next_obs stacks
    # hold, plus the small columns (compact chunks store far less)
    assert 0 < result["bytes_per_step"][0] < 9 * FRAME
    last = done.stdout.strip().splitlines()[-1]
    assert last == (f"pixels: collect/raw={result['collect_raw']} stack/sb3=n/a "
                    f"bytes_per_step={result['bytes_per_step'][0]:.0f} stack_lag1/sb3=n/a")
    assert "Sample Factory APPO: skipped: " in done.stdout


def test_an_unknown_arm_and_a_missing_config_are_refused_saying_what_would_work(tmp_path: Path) -> None:
    done = run("--config", str(CONFIG), "--arms", "raw,sb3")
    assert done.returncode == 2 and "--arms: unknown ['sb3']; choose from raw_random, raw" in done.stderr
    done = run("--config", str(tmp_path / "pong_ppo.yaml"))
    assert done.returncode == 2 and "bench/pong_factory_ppo.yaml runs the same game" in done.stderr
