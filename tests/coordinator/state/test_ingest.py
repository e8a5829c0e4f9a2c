"""coordinator.state.ingest: the checks a chunk report must pass before it is acknowledged, and the ledger of
acknowledged chunk ids, bounded by a time window and a hard cap."""

from __future__ import annotations

import pytest

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.state.ingest import IngestLedger, check_report
from rlfleet.shared.config.run_config import RunConfig
from tests.support.components import report


def test_the_ledger_remembers_ids_for_its_window_and_refuses_reused_ids_with_other_content() -> None:
    ledger = IngestLedger(window_seconds=100.0, max_ids=1_000)
    ledger.add("a", "1" * 64, acked_at=0.0)
    ledger.add("b", "2" * 64, acked_at=50.0)
    assert ledger.seen("a", "1" * 64)
    with pytest.raises(Conflict):
        ledger.seen("a", "3" * 64)
    assert ledger.expire(now=120.0) == 20.0
    assert "a" not in ledger and "b" in ledger
    assert not ledger.seen("a", "1" * 64)


def test_the_ledger_is_capped_however_fast_chunks_arrive() -> None:
    ledger = IngestLedger(window_seconds=1e9, max_ids=10)
    for i in range(25):
        ledger.add(f"c{i}", "0" * 64, acked_at=float(i))
    assert len(ledger) == 10 and "c24" in ledger and "c14" not in ledger


def test_a_report_in_the_runs_layout_of_a_published_version_passes(run_config: RunConfig) -> None:
    check_report(report(run_config, "c1", returns=(1.0, 2.0), policy_version=3), run_config, latest_version=3)


@pytest.mark.parametrize(("changes", "message"), [
    ({"payload_path": "chunks/other/c1.msgpack"}, "payload_path must be"),
    ({"num_envs": 3}, "collector.num_envs=2"),
    ({"env_steps": 31, "ends": []}, "multiple of num_envs"),
    ({"env_steps": 30, "ends": []}, "num_envs x collector.chunk_steps"),
    ({"ends": [5, 5]}, "strictly ascending"),
    ({"ends": [32]}, "strictly ascending"),
    ({"env_errors": 1}, "exceeds the episode ends"),
    ({"fresh_columns": [0, 0]}, "fresh_columns"),
    ({"fresh_columns": [2]}, "fresh_columns"),
    ({"policy_version": 4}, "never published"),
])
def test_a_report_that_cannot_describe_a_chunk_of_this_run_is_refused_naming_the_field(
        run_config: RunConfig, changes: dict, message: str) -> None:
    with pytest.raises(Invalid, match=message):
        check_report(report(run_config, "c1", **changes), run_config, latest_version=3)


def test_more_episodes_than_ends_are_refused(run_config: RunConfig) -> None:
    lying = report(run_config, "c1", returns=(1.0, 2.0)).model_copy(update={"ends": [31]})
    with pytest.raises(Invalid, match="2 episodes reported but only 1"):
        check_report(lying, run_config, latest_version=0)
