"""The samples-per-insert ratio holds while the fleet changes size: 1 collector, then 3, then 1 again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.wire import BufferStatus
from tests.support.configs import small_run_config
from tests.support.fleet import Fleet

SPI = 4.0
TOLERANCE = 1024
MIN = 256
PHASE_SECONDS = 12.0
# Chunks per collector that can still arrive after the band's edge: the one being uploaded (its ack may be the
# last "go on"), two in the upload queue, the one being stepped when "pause" arrives, and one more when a
# heartbeat reply computed just before the pause lands after the ack that carried it.
IN_FLIGHT = 5


def scaling_config() -> RunConfig:
    # Small chunks and a narrow band, so a late "pause" would show; the learner is the bottleneck here, so
    # the collectors' edge of the band is the one exercised, harder with three of them.
    data = small_run_config().model_dump(mode="json")
    data["collector"] = {"num_envs": 4, "chunk_steps": 32}
    data["replay"] = {"capacity_transitions": 20_000, "min_transitions": MIN, "samples_per_insert": SPI,
                      "tolerance_transitions": TOLERANCE}
    data["algo"]["batches_per_request"] = 4
    return RunConfig.model_validate(data)


def band(buf: BufferStatus, collectors: int, chunk: int, request: int) -> tuple[float, float, float]:
    """(low, diff, high): diff = (inserted - min) * spi - sampled must stay within the limiter's band, widened
    by what is legitimately in flight: one sample request, and per collector IN_FLIGHT chunks."""
    diff = (buf.inserted_transitions - MIN) * SPI - buf.sampled_transitions
    return -SPI * TOLERANCE - request, diff, SPI * TOLERANCE + SPI * chunk * IN_FLIGHT * collectors


@pytest.mark.slow
def test_ratio_stays_in_band_as_collectors_go_from_1_to_3_to_1(tmp_path: Path, data_dir: Path,
                                                               tokens: dict[str, str]) -> None:
    config = scaling_config()
    config_file = tmp_path / "scaling.yaml"
    config_file.write_text(dump_run_config(config))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_LEASE_SECONDS": "3"})
    chunk = config.collector.num_envs * config.collector.chunk_steps
    request = config.algo.batch_size * config.algo.batches_per_request
    phases: list[tuple[int, int, int]] = []  # (collectors, inserted delta, sampled delta)
    try:
        fleet.start_coordinator()
        fleet.start_worker("learner", "learner")
        fleet.start_worker("collector-a", "collector")
        fleet.wait_for(lambda: fleet.status().buffers[0].sampled_transitions > 0, 90, "the learner sampling")
        for collectors in (1, 3, 1):
            running = sum(1 for name in fleet.procs if name.startswith("collector-"))
            for extra in range(running, collectors):
                fleet.start_worker(f"collector-{'abc'[extra]}", "collector")
            for name in sorted(n for n in fleet.procs if n.startswith("collector-"))[collectors:]:
                fleet.procs.pop(name).terminate()  # a clean scale-down, like `--scale collector=1`
            start = fleet.status().buffers[0]
            worst_low, worst_high = 0.0, 0.0
            deadline = time.monotonic() + PHASE_SECONDS
            while time.monotonic() < deadline:
                buf = fleet.status().buffers[0]
                low, diff, high = band(buf, 3, chunk, request)
                assert low <= diff <= high, f"{collectors} collector(s): diff {diff} outside [{low}, {high}]"
                worst_low, worst_high = min(worst_low, diff), max(worst_high, diff)
                time.sleep(0.1)
            end = fleet.status().buffers[0]
            phases.append((collectors, end.inserted_transitions - start.inserted_transitions,
                           end.sampled_transitions - start.sampled_transitions))
            print(f"{collectors} collector(s): diff range [{worst_low:.0f}, {worst_high:.0f}], "
                  f"inserted {phases[-1][1]}, sampled {phases[-1][2]}, "
                  f"ratio {phases[-1][2] / max(1, phases[-1][1]):.2f}")
        st = fleet.status()
        assert len([w for w in st.workers if w.kind == "collector"]) >= 1
    finally:
        fleet.close()
    for collectors, inserted, sampled in phases:
        assert inserted > 0 and sampled > 0, f"phase with {collectors} collector(s) made no progress"
        # Over a phase the achieved ratio deviates from the target by at most the band's width.
        assert abs(sampled - SPI * inserted) <= 2 * SPI * TOLERANCE + SPI * chunk * IN_FLIGHT * 3 + request
