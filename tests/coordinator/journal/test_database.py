"""coordinator.journal.database.Journal: SQLite in WAL mode holding each component's meta value and tables, a
format that is checked on open, and what a restarting run reads back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rlfleet.coordinator.journal.component import Table
from rlfleet.coordinator.journal.database import FORMAT, Journal, JournalFormatError, stored_meta, stored_run_state
from tests.support.journal import journal_with

NOTES = Table("notes", "CREATE TABLE IF NOT EXISTS notes (n INTEGER PRIMARY KEY, text TEXT NOT NULL);",
              "SELECT n, text FROM notes ORDER BY n")


def test_a_journal_of_another_format_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('journal_format', ?)", (json.dumps(FORMAT - 1),))
    db.commit()
    db.close()
    with pytest.raises(JournalFormatError, match="start a new run"):
        Journal(path)


def test_a_journal_written_by_an_older_release_without_a_format_key_is_format_1_and_refused(tmp_path: Path) -> None:
    path = tmp_path / "older.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('config', '{}')")
    db.commit()
    db.close()
    with pytest.raises(JournalFormatError, match="format 1"):
        Journal(path)


def test_synchronous_must_be_normal_or_full() -> None:
    with pytest.raises(ValueError, match="NORMAL or FULL"):
        Journal(None, synchronous="OFF")


def test_a_new_journal_has_nothing_to_load() -> None:
    journal = journal_with([NOTES])
    assert journal.meta() == {} and journal.load(["notes"], [NOTES]) is None


def test_load_gives_each_key_its_meta_and_the_rows_of_the_tables_asked_for(tmp_path: Path) -> None:
    journal = journal_with([NOTES], tmp_path / "j.sqlite")
    insert = "INSERT INTO notes (n, text) VALUES (?, ?)"
    meta = {"journal_format": FORMAT, "notes": {"count": 2}}
    journal.submit([(insert, (2, "b")), (insert, (1, "a"))], meta).result(5)
    journal.close()
    reopened = Journal(tmp_path / "j.sqlite")  # the format the unit of work writes is the one it reads
    loaded = reopened.load(["notes", "newer"], [NOTES])
    assert loaded is not None
    meta, stored = loaded
    assert meta == {"journal_format": FORMAT, "notes": {"count": 2}}
    assert stored["notes"].meta == {"count": 2} and stored["notes"].rows == {"notes": [(1, "a"), (2, "b")]}
    assert stored["newer"].meta is None  # a component the journal's writer did not have yet


def test_tools_read_meta_and_the_run_state_without_opening_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    assert stored_meta(path, "lifecycle") == {} and stored_run_state(path) is None  # no file
    journal = journal_with([], path)
    assert stored_run_state(path) is None  # nothing committed yet
    journal.submit([], {"lifecycle": {"state": "solved"}, "other": 1}).result(5)
    assert stored_meta(path, "other", "missing") == {"other": 1}
    assert stored_run_state(path) == "solved"
    journal.close()
