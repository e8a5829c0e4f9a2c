"""The dataset server: every train transition once per epoch, a fresh order each epoch, retries answered alike,
what it marks for the journal, and its position kept across a restart (through a real journal too)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.datasets import DatasetServer
from rlfleet.shared.payloads.recordings import DatasetManifest
from rlfleet.shared.storage.local import LocalStore
from tests.support.components import JournalFor
from tests.support.datasets import write_demo_dataset


@pytest.fixture
def manifest(tmp_path: Path) -> DatasetManifest:
    return write_demo_dataset(LocalStore(tmp_path), n=10)  # 6 train episodes of 10..19 rows


def _served(server: DatasetServer, batch: dict) -> list[tuple[str, int]]:
    return [(batch["files"][i].path, r) for i, r in zip(batch["file_index"], batch["rows"], strict=True)]


def test_an_epoch_serves_every_train_transition_once(manifest: DatasetManifest) -> None:
    server = DatasetServer(manifest, seed=0, epochs=2)
    train = manifest.splits["train"]
    everything = sorted((f, r) for f, rows in zip(train.files, train.rows, strict=True) for r in range(rows))
    for epoch in (1, 2):
        served, complete = [], False
        while not complete:
            batch = server.next_batch(16, None)
            assert batch["epoch"] == epoch
            served += _served(server, batch)
            complete = batch["epoch_complete"]
        assert sorted(served) == everything
        assert len(served) == train.transitions
    assert server.done and server.next_batch(16, None)["files"] == []


def test_each_epoch_has_its_own_order_and_the_seed_decides_it(manifest: DatasetManifest) -> None:
    a, b = DatasetServer(manifest, seed=0, epochs=3), DatasetServer(manifest, seed=1, epochs=3)
    total = manifest.splits["train"].transitions
    first, second = _served(a, a.next_batch(total, None)), _served(a, a.next_batch(total, None))
    assert first != second and sorted(first) == sorted(second)
    assert _served(b, b.next_batch(total, None)) != first


def test_a_retried_request_gets_the_same_batch(manifest: DatasetManifest) -> None:
    server = DatasetServer(manifest, seed=0, epochs=1)
    batch = server.next_batch(8, "r1")
    assert server.next_batch(8, "r1") == batch and server.batches == 1
    assert server.next_batch(8, "r2") != batch


def test_the_position_survives_a_restart(manifest: DatasetManifest) -> None:
    server = DatasetServer(manifest, seed=0, epochs=2)
    for _ in range(3):
        server.next_batch(20, None)
    restored = DatasetServer(manifest, seed=0, epochs=2)
    restored.load_state_dict(Stored(server.state_dict()), now=0.0)
    assert restored.next_batch(20, None) == server.next_batch(20, None)
    status = restored.status()
    assert status.epoch == 1 and status.batches_served == 4 and status.train_episodes == 6
    assert status.recorded_return_mean == np.mean(range(10, 20))


@pytest.mark.parametrize("ends_the_run", [False, True], ids=["within-the-epoch", "ending-the-run"])
def test_a_request_retried_after_a_restart_gets_the_same_batch(manifest: DatasetManifest, tmp_path: Path,
                                                                ends_the_run: bool) -> None:
    """The coordinator restarts between the commit of a batch and its reply: the learner's retry must get that
    batch, not the next (which would skip a batch of the epoch, or end the run without its last one)."""
    server = DatasetServer(manifest, seed=0, epochs=1)
    journal = JournalFor(tmp_path / "journal.sqlite", server)
    size = 8
    server.next_batch(manifest.splits["train"].transitions - 5 if ends_the_run else size, "r0")
    sent = server.next_batch(size, "r1")
    assert sent["epoch_complete"] is ends_the_run and len(sent["rows"]) == (5 if ends_the_run else size)
    journal.commit()
    restored = journal.restore(DatasetServer(manifest, seed=0, epochs=1), now=0.0)
    assert restored.next_batch(size, "r1") == sent
    assert restored.batches == server.batches and restored.state_dict() == server.state_dict()
    assert restored.next_batch(size, "r2") == server.next_batch(size, "r2")


def test_each_epochs_scores_are_kept_once(manifest: DatasetManifest) -> None:
    server = DatasetServer(manifest, seed=0, epochs=3)
    assert not server.record_scores({"nll": 0.3})  # an update's report without an epoch's scores
    assert server.record_scores({"nll": 0.3, "valid_nll": 0.4, "valid_accuracy": 0.9, "epoch": 1.0})
    assert not server.record_scores({"nll": 0.2, "valid_nll": 0.4, "valid_accuracy": 0.9, "epoch": 1.0})  # again
    assert server.record_scores({"valid_nll": 0.2, "valid_accuracy": 0.95, "epoch": 2.0})
    restored = DatasetServer(manifest, seed=0, epochs=3)
    restored.load_state_dict(Stored(server.state_dict()), now=0.0)
    assert [(s.epoch, s.scores) for s in restored.status().epoch_scores] == [
        (1, {"valid_nll": 0.4, "valid_accuracy": 0.9}), (2, {"valid_nll": 0.2, "valid_accuracy": 0.95})]


def test_serving_and_new_scores_mark_the_state_and_retries_and_reads_do_not(manifest: DatasetManifest) -> None:
    server = DatasetServer(manifest, seed=0, epochs=1)
    server.next_batch(8, "r1")
    assert server.pending.dirty and server.pending.rows == []
    server.pending.clear()
    server.next_batch(8, "r1")  # a retry
    server.record_scores({"nll": 0.3})  # no epoch's scores in it
    server.status()
    assert not server.pending.dirty
    server.record_scores({"valid_nll": 0.3, "epoch": 1.0})
    assert server.pending.dirty


def test_position_and_scores_survive_a_round_trip(manifest: DatasetManifest, tmp_path: Path) -> None:
    server = DatasetServer(manifest, seed=3, epochs=2)
    journal = JournalFor(tmp_path / "journal.sqlite", server)
    total = manifest.splits["train"].transitions
    server.next_batch(total - 5, None)
    server.next_batch(10, None)  # crosses into epoch 2
    server.record_scores({"valid_nll": 0.5, "epoch": 1.0})
    journal.commit()
    restored = journal.restore(DatasetServer(manifest, seed=3, epochs=2), now=0.0)
    assert restored.state_dict() == server.state_dict() and (restored.epoch, restored.cursor) == (2, 0)
    assert restored.next_batch(7, None) == server.next_batch(7, None)


def test_a_journal_without_the_servers_state_starts_at_the_first_batch(manifest: DatasetManifest) -> None:
    server = DatasetServer(manifest, seed=0, epochs=1)
    server.load_state_dict(Stored(), now=0.0)
    assert (server.epoch, server.cursor, server.batches, server.scores) == (1, 0, 0, [])
