"""coordinator.state.dataplane.DataPlane without a Run: ingest, sampling and its refusals, what each change
marks for the journal, and a round trip of its counters, buffer, replay log and replies through a real journal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlfleet.coordinator.errors import Invalid, NotEnoughData
from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.replay.buffer import Entry
from rlfleet.coordinator.state.dataplane import DataPlane, chunk_row, chunks_forgotten, chunks_gone
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.wire import SampleRequest
from tests.support.components import JournalFor, report
from tests.support.configs import make_config
from tests.support.journal import journal_with, rows

LEARNER = "learner-1-abcdef"


@pytest.fixture
def prioritized(run_config: RunConfig) -> RunConfig:
    """Chunks of 32 rows, drawn by priority, each item drawable three times."""
    return make_config(run_config, replay={"sampler": "prioritized", "min_transitions": 1, "max_use": 3})


def filled(config: RunConfig, chunks: int = 3) -> DataPlane:
    data = DataPlane(config, idempotency_seconds=900.0, max_ids=1_000)
    data.ingest([report(config, f"c{i}", returns=(float(i),)) for i in range(chunks)], latest_version=0,
                acked_at=100.0)
    return data


def request(batch: int = 8) -> SampleRequest:
    return SampleRequest(worker_id=LEARNER, batch_size=batch, num_batches=1)


# ----- rules ---------------------------------------------------------------------------------------------------
def test_ingest_counts_buffers_and_remembers_each_chunk(run_config: RunConfig) -> None:
    data = filled(run_config)
    assert (data.chunks, data.env_steps, data.episodes, list(data.recent_returns)) == (3, 96, 3, [0.0, 1.0, 2.0])
    assert len(data.buffer) == 3 and data.buffer.transitions == 96 and data.limiter.inserted == 96
    assert "c2" in data.ledger and data.producers["c1"] == "collector-1-abcdef"


def test_nothing_is_served_before_the_warm_up(run_config: RunConfig) -> None:
    data = filled(run_config, chunks=1)  # 32 transitions of the 64 the config needs
    with pytest.raises(NotEnoughData, match="needs 64"):
        data.sample(request(), latest_version=0)


def test_a_sample_outside_the_batch_bounds_is_refused(run_config: RunConfig) -> None:
    config = make_config(run_config, sampling={"min_batch_size": 16, "max_batch_size": 64})
    with pytest.raises(Invalid, match="outside the configured batch bounds"):
        filled(config).sample_size(request(batch=65))


def test_priorities_of_ids_never_issued_are_refused(prioritized: RunConfig) -> None:
    data = filled(prioritized)
    with pytest.raises(Invalid, match="never issued"):
        data.update_priorities(np.array([data.buffer.head]), np.array([1.0]))


def test_a_corrupt_chunk_leaves_the_buffer_and_names_its_producer(run_config: RunConfig) -> None:
    data = filled(run_config)
    assert data.remove_corrupt("c1") == (True, "collector-1-abcdef")
    assert "c1" not in data.buffer and data.corrupt_chunks == 1
    assert data.remove_corrupt("c1") == (False, None)


def test_a_retried_sample_request_gets_the_reply_it_was_sent(run_config: RunConfig) -> None:
    data = filled(run_config)
    data.remember_reply(LEARNER, "r1", '{"reply": 1}')
    assert data.retried(LEARNER, "r1") == '{"reply": 1}'
    assert data.retried(LEARNER, "r2") is None and data.retried(LEARNER, None) is None
    data.forget_replies([LEARNER])
    assert data.retried(LEARNER, "r1") is None


# ----- what each change marks ----------------------------------------------------------------------------------
def test_ingest_marks_the_counters_and_one_row_per_chunk(run_config: RunConfig) -> None:
    data = filled(run_config)
    assert data.pending.dirty
    assert [args[0] for sql, args in data.pending.rows if sql.startswith("INSERT INTO chunks")] == ["c0", "c1", "c2"]


def test_reading_marks_nothing(prioritized: RunConfig) -> None:
    data = filled(prioritized)
    data.pending.clear()
    data.sample_size(request())
    data.servable(8)
    data.collectors_ahead()
    data.retried(LEARNER, "r1")
    data.status()
    data.beta()
    data.compact()  # the log is short: nothing to compact
    assert not data.pending.dirty and data.pending.rows == [] and data.pending.freed == []


def test_a_duplicate_and_rollouts_mark_the_counters_only(run_config: RunConfig) -> None:
    data = DataPlane(run_config, 900.0, 1_000)
    data.count_duplicate()
    data.count_rollouts(env_steps=10, episodes=2, mean_return=5.0)
    assert data.pending.dirty and data.pending.rows == []
    assert (data.duplicate_chunks, data.env_steps, data.episodes) == (1, 10, 2)


def test_a_draw_with_max_use_logs_the_use_and_frees_no_file(prioritized: RunConfig) -> None:
    data = filled(prioritized)
    data.pending.clear()
    drawn = data.sample(request(), latest_version=0)
    assert len(drawn.ids) == 8 and data.limiter.sampled == 8
    assert [args[0] for sql, args in data.pending.rows if "replay_log" in sql] == ["use"]
    assert data.pending.freed == []  # a drawn-up chunk's file outlives the draw: the learner reads it next


def test_a_draw_marks_the_sampled_count_and_lags_even_with_nothing_to_log(run_config: RunConfig) -> None:
    data = filled(run_config)  # uniform, no max_use: no replay-log record
    data.pending.clear()
    data.sample(request(), latest_version=2)
    assert data.pending.dirty and data.state_dict()["sampled"] == 8 and data.lag.sampled_max == 2


def test_priority_updates_are_logged(prioritized: RunConfig) -> None:
    data = filled(prioritized)
    data.pending.clear()
    assert data.update_priorities(np.array([0, 1]), np.array([5.0, 0.5])) == 2
    assert [args[0] for sql, args in data.pending.rows] == ["priority"]


def test_a_removed_chunk_marks_its_row_and_frees_its_file(run_config: RunConfig) -> None:
    data = filled(run_config)
    data.pending.clear()
    data.remove_corrupt("c1")
    assert data.pending.dirty and any(sql.startswith("UPDATE chunks SET in_buffer=0") for sql, _ in data.pending.rows)
    assert data.pending.freed == ["chunks/collector-0/c1.msgpack"]


def test_replies_and_expired_ids_mark_their_rows(run_config: RunConfig) -> None:
    data = DataPlane(run_config, 900.0, 1_000)
    data.remember_reply(LEARNER, None, "{}")  # no request id: nothing to answer a retry with
    assert not data.pending.dirty
    data.remember_reply(LEARNER, "r1", "{}")
    data.forget_replies([LEARNER])
    data.expire_ids(acked_before=50.0)
    assert [sql.split()[0] for sql, _ in data.pending.rows] == ["INSERT", "DELETE", "DELETE"]


def test_a_long_replay_log_is_replaced_by_one_snapshot(prioritized: RunConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rlfleet.coordinator.state.dataplane.SNAPSHOT_EVERY", 2)
    data = filled(prioritized)
    for _ in range(3):
        data.update_priorities(np.array([0]), np.array([2.0]))
    data.pending.clear()
    data.compact()
    assert [sql.split()[0] for sql, _ in data.pending.rows] == ["DELETE", "INSERT"] and data.replay_records == 1


# ----- persistence ---------------------------------------------------------------------------------------------
def test_counters_buffer_priorities_uses_and_replies_survive_a_round_trip(prioritized: RunConfig,
                                                                          tmp_path: Path) -> None:
    data = filled(prioritized, chunks=4)
    journal = JournalFor(tmp_path / "journal.sqlite", data)
    journal.commit()
    data.sample(request(), latest_version=0)
    data.update_priorities(np.array([0, 5, 40]), np.array([3.0, 0.2, 1.5]))
    data.remove_corrupt("c3")
    data.count_duplicate()
    data.remember_reply(LEARNER, "r1", '{"reply": 1}')
    journal.commit()
    assert journal.freed == ["chunks/collector-0/c3.msgpack"]

    restored = journal.restore(DataPlane(prioritized, 900.0, 1_000), now=0.0)
    assert restored.state_dict() == data.state_dict()
    assert restored.buffer.entries() == data.buffer.entries()
    for ours, theirs in zip(restored.buffer.priority_state(), data.buffer.priority_state(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert list(restored.ledger._acked) == list(data.ledger._acked)
    assert restored.producers == data.producers
    assert restored.retried(LEARNER, "r1") == '{"reply": 1}'
    assert restored.pending.rows == []  # nothing was found gone


def test_a_snapshot_in_the_log_restores_the_same_buffer(prioritized: RunConfig, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rlfleet.coordinator.state.dataplane.SNAPSHOT_EVERY", 1)
    data = filled(prioritized)
    journal = JournalFor(tmp_path / "journal.sqlite", data)
    data.update_priorities(np.array([1, 2]), np.array([4.0, 0.1]))
    data.sample(request(), latest_version=0)
    data.compact()
    data.update_priorities(np.array([3]), np.array([9.0]))
    journal.commit()
    restored = journal.restore(DataPlane(prioritized, 900.0, 1_000), now=0.0)
    assert restored.replay_records == 2  # the snapshot and the update after it
    for ours, theirs in zip(restored.buffer.priority_state(), data.buffer.priority_state(), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_a_journal_from_before_two_player_games_loads_without_tallies(run_config: RunConfig) -> None:
    data = filled(run_config)
    state = data.state_dict()
    del state["games"]  # journals from before two-player games
    restored = DataPlane(run_config, 900.0, 1_000)
    restored.load_state_dict(Stored(state, {"chunks": [], "replay_log": [], "replies": []}), now=0.0)
    assert restored.games == {} and restored.chunks == 3


def test_rows_of_chunks_out_of_the_buffer_and_the_window_are_deleted() -> None:
    journal = journal_with(DataPlane.tables)
    old = Entry("old", "chunks/t/old.msgpack", "0" * 64, 4, 0)
    new = Entry("new", "chunks/t/new.msgpack", "1" * 64, 4, 0)
    journal.submit([chunk_row(old, 0, 1.0, "w", acked_at=10.0), chunk_row(new, 4, 1.0, "w", acked_at=90.0)])
    journal.submit(chunks_gone([old, new]))
    journal.submit([chunks_forgotten(acked_before=50.0)])
    assert rows(journal, "SELECT chunk_id FROM chunks") == [("new",)]
