"""coordinator.journal.unit.UnitOfWork: a commit journals exactly the components an operation touched, their
rows and (unless everything is in their tables) their state; freed payload files go only once that is durable,
never after a failed commit; `after` sees the commit durable; nothing touched submits nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlfleet.coordinator.journal.committer import JournalFailed
from rlfleet.coordinator.journal.database import FORMAT
from rlfleet.coordinator.journal.unit import UnitOfWork
from rlfleet.coordinator.state.control import Control
from rlfleet.coordinator.state.payloads import PayloadLifetime
from rlfleet.coordinator.state.policybook import PolicyBook
from rlfleet.coordinator.state.progress import LearnerProgress
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import PolicyRef
from tests.support.journal import fill_journal, free_journal, journal_with, rows

POLICY = PolicyRef(version=1, path="policies/v00000001.safetensors", sha256="ab" * 32)


class Parts:
    """Three real components over one journal file, and a payload store whose files they may free."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "journal.sqlite"
        self.control, self.book, self.learner = Control(()), PolicyBook(2), LearnerProgress()
        self.journal = journal_with(PolicyBook.tables, self.path)
        self.store = LocalStore(tmp_path / "store")
        self.payloads = PayloadLifetime(self.store)
        self.unit = UnitOfWork(self.journal, [self.control, self.book, self.learner], self.payloads.delete)

    def free(self, path: str) -> None:
        """A payload file the control component has let go of (as the data plane frees a chunk's file)."""
        self.store.put(path, b"payload")
        self.control.pending.freed.append(path)


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    made = Parts(tmp_path)
    yield made
    made.payloads.close()
    made.journal.close()


def test_only_the_touched_components_are_written(parts: Parts) -> None:
    parts.control.pause(True)
    assert parts.unit.touched() == [parts.control]
    parts.unit.commit().result(timeout=10)
    meta = parts.journal.meta()
    assert meta == {"journal_format": FORMAT, "control": parts.control.state_dict()}
    assert "learner" not in meta and parts.unit.touched() == []


def test_a_component_whose_state_is_all_in_its_tables_writes_rows_and_no_meta(parts: Parts) -> None:
    parts.book.publish(POLICY)
    assert parts.unit.touched() == [parts.book]
    parts.unit.commit().result(timeout=10)
    assert "policies" not in parts.journal.meta()
    assert rows(parts.journal, "SELECT version, path FROM policies") == [(1, POLICY.path)]


def test_freed_files_are_deleted_once_the_commit_is_durable(parts: Parts) -> None:
    parts.free("chunks/t/gone.msgpack")
    parts.unit.commit().result(timeout=10)
    parts.payloads.flush()
    assert parts.store.size("chunks/t/gone.msgpack") is None


def test_freed_files_stay_when_the_commit_fails(parts: Parts) -> None:
    parts.free("chunks/t/kept.msgpack")
    parts.control.checkpoint()
    fill_journal(parts.journal)
    with pytest.raises(JournalFailed):
        parts.unit.commit().result(timeout=10)
    parts.payloads.flush()
    # memory is reloaded from the journal, which still names the file
    assert parts.store.size("chunks/t/kept.msgpack") is not None
    free_journal(parts.journal)
    parts.journal.committer.clear()
    assert "control" not in parts.journal.meta()


def test_after_runs_once_the_commit_is_durable_and_never_after_a_failed_one(parts: Parts) -> None:
    seen: list[object] = []

    def read_meta_from_another_connection() -> None:
        db = sqlite3.connect(parts.path)
        seen.append(db.execute("SELECT value FROM meta WHERE key='control'").fetchone())
        db.close()

    parts.control.pause(True)
    parts.unit.commit(after=read_meta_from_another_connection).result(timeout=10)
    assert seen == [(json.dumps(parts.control.state_dict()),)]
    parts.control.pause(False)
    fill_journal(parts.journal)
    with pytest.raises(JournalFailed):
        parts.unit.commit(after=read_meta_from_another_connection).result(timeout=10)
    assert len(seen) == 1


def test_nothing_touched_submits_nothing(parts: Parts) -> None:
    before = parts.journal.committer.submissions
    done = parts.unit.commit()
    assert done.result(timeout=10) is None and parts.journal.committer.submissions == before


def test_nothing_touched_with_something_to_run_after_still_runs_it(parts: Parts) -> None:
    ran: list[bool] = []
    parts.unit.commit(after=lambda: ran.append(True)).result(timeout=10)
    assert ran == [True]

