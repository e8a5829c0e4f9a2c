"""coordinator.state.lag.LagStats: how many policy versions behind the data is, at ingest and at sampling; its
state travels inside the data plane's journalled state."""

from __future__ import annotations

import json

import numpy as np

from rlfleet.coordinator.state.lag import TAIL, LagStats


def test_ingest_lags_are_binned_with_a_tail_and_negative_lags_count_as_zero() -> None:
    lag = LagStats()
    for value in (0, 1, 1, TAIL + 5, -2):
        lag.ingested(value)
    status = lag.status()
    assert status.ingest_histogram == {"0": 2, "1": 2, f"{TAIL}+": 1}
    assert (status.ingest_max, status.ingest_mean) == (TAIL + 5, (1 + 1 + TAIL + 5) / 5)


def test_sampled_lags_keep_their_mean_and_max_and_an_empty_draw_changes_nothing() -> None:
    lag = LagStats()
    lag.sampled(np.array([0, 2, 4]))
    lag.sampled(np.array([], dtype=np.int64))
    assert (lag.status().sampled_mean, lag.status().sampled_max) == (2.0, 4)


def test_the_state_survives_json_as_the_journal_stores_it() -> None:
    lag = LagStats()
    lag.ingested(3)
    lag.ingested(TAIL + 1)
    lag.sampled(np.array([1, 5]))
    restored = LagStats()
    restored.restore(json.loads(json.dumps(lag.state())))
    assert restored.status() == lag.status() and restored.state() == lag.state()
