"""coordinator.state.policybook.PolicyBook: versions strictly increase, the newest few are kept, republishing
the latest is a no-op; its rows are its whole state, restored through a real journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlfleet.coordinator.errors import Conflict
from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.policybook import PolicyBook
from rlfleet.shared.wire import PolicyRef
from tests.support.components import JournalFor


def ref(version: int, sha: str = "ab") -> PolicyRef:
    return PolicyRef(version=version, path=f"policies/v{version:08d}.safetensors", sha256=sha * 32)


def test_the_newest_versions_are_kept_and_the_dropped_ones_returned() -> None:
    book = PolicyBook(keep=2)
    assert book.publish(ref(1)) == (True, [])
    assert book.publish(ref(2)) == (True, [])
    assert book.publish(ref(5)) == (True, [ref(1)])
    assert [p.version for p in book.versions] == [2, 5] and book.latest == ref(5) and book.latest_version == 5


def test_republishing_the_latest_is_a_no_op_and_anything_older_or_different_is_refused() -> None:
    book = PolicyBook(keep=2)
    book.publish(ref(3))
    assert book.publish(ref(3)) == (False, [])
    with pytest.raises(Conflict, match="not newer than 3"):
        book.publish(ref(3, sha="cd"))
    with pytest.raises(Conflict, match="not newer than 3"):
        book.publish(ref(2))


def test_workers_are_told_only_of_versions_known_durable_and_never_an_older_one() -> None:
    book = PolicyBook(keep=2)
    book.publish(ref(2))
    assert book.committed is None and book.committed_version == 0
    book.mark_committed(ref(2))
    book.mark_committed(ref(1))
    assert book.committed == ref(2)


def test_a_publish_marks_its_row_and_the_rows_of_dropped_versions() -> None:
    book = PolicyBook(keep=1)
    book.publish(ref(1))
    book.publish(ref(2))
    assert [(sql.split()[0], args[0]) for sql, args in book.pending.rows] == [("INSERT", 1), ("INSERT", 2),
                                                                              ("DELETE", 1)]
    assert not book.pending.dirty  # no meta value: everything is in its table


def test_refused_and_repeated_publishes_and_reads_mark_nothing() -> None:
    book = PolicyBook(keep=2)
    book.publish(ref(2))
    book.pending.clear()
    book.publish(ref(2))
    with pytest.raises(Conflict):
        book.publish(ref(1))
    book.mark_committed(ref(2))
    assert (book.latest, book.latest_version, book.committed_version) == (ref(2), 2, 2)
    assert book.pending.rows == [] and not book.pending.dirty


def test_the_kept_versions_survive_a_round_trip_and_the_latest_counts_as_committed(tmp_path: Path) -> None:
    book = PolicyBook(keep=2)
    journal = JournalFor(tmp_path / "journal.sqlite", book)
    for version in (1, 2, 3):
        book.publish(ref(version))
        journal.commit()
    book.publish(ref(4))
    journal.commit()
    restored = journal.restore(PolicyBook(keep=2), now=0.0)
    assert list(restored.versions) == [ref(3), ref(4)]
    assert restored.committed == ref(4)  # it was durable: it is what workers are told of


def test_a_new_run_restores_an_empty_book() -> None:
    book = PolicyBook(keep=2)
    book.load_state_dict(Stored(None, {"policies": []}), now=0.0)
    assert book.latest is None and book.committed is None
