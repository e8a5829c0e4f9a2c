"""coordinator.journal.component: what a component records as it mutates (`Pending`), what it gets back
(`Stored`), and the rule the journal relies on: every meta key and every table belongs to exactly one component,
and each table's query reads what its DDL creates."""

from __future__ import annotations

import sqlite3

import pytest

from rlfleet.coordinator.journal.component import Component, Pending, Stored
from rlfleet.coordinator.state.config import LiveConfig
from rlfleet.coordinator.state.control import Control
from rlfleet.coordinator.state.dataplane import DataPlane
from rlfleet.coordinator.state.datasets import DatasetServer
from rlfleet.coordinator.state.fleet import Fleet
from rlfleet.coordinator.state.generations import Generations
from rlfleet.coordinator.state.judge import Judge
from rlfleet.coordinator.state.lifecycle import Lifecycle
from rlfleet.coordinator.state.opponents import Opponents
from rlfleet.coordinator.state.policybook import PolicyBook
from rlfleet.coordinator.state.progress import LearnerProgress

COMPONENTS: list[type[Component]] = [LiveConfig, Control, DataPlane, DatasetServer, Fleet, Generations, Judge,
                                     Lifecycle, Opponents, PolicyBook, LearnerProgress]


def test_mark_asks_for_the_state_and_keeps_rows_in_the_order_made() -> None:
    pending = Pending()
    assert (pending.dirty, pending.rows, pending.freed) == (False, [], [])
    pending.mark()
    assert pending.dirty and pending.rows == []
    pending.mark([("INSERT INTO t VALUES (?)", (1,))])
    pending.mark([("DELETE FROM t WHERE x=?", (1,)), ("INSERT INTO t VALUES (?)", (2,))])
    assert [args for _, args in pending.rows] == [(1,), (1,), (2,)]


def test_clear_forgets_state_rows_and_freed_files() -> None:
    pending = Pending()
    pending.mark([("DELETE FROM t", ())])
    pending.freed.append("chunks/t/c.msgpack")
    pending.clear()
    assert (pending.dirty, pending.rows, pending.freed) == (False, [], [])


def test_a_component_stored_before_it_existed_has_no_meta_and_no_rows() -> None:
    assert (Stored().meta, Stored().rows) == (None, {})


def test_every_meta_key_and_every_table_has_one_owner_and_none_is_the_journals_own() -> None:
    keys = [c.key for c in COMPONENTS]
    tables = [t.name for c in COMPONENTS for t in c.tables]
    assert len(set(keys)) == len(keys), keys
    assert len(set(tables)) == len(tables), tables
    assert "journal_format" not in keys and "meta" not in tables


@pytest.mark.parametrize("component", [c for c in COMPONENTS if c.tables], ids=lambda c: c.__name__)
def test_each_table_query_reads_what_its_ddl_creates(component: type[Component]) -> None:
    db = sqlite3.connect(":memory:")
    for table in component.tables:
        db.executescript(table.ddl)
        db.executescript(table.ddl)  # IF NOT EXISTS: a resumed run creates its tables again
        assert table.name in {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert db.execute(table.select).fetchall() == []
