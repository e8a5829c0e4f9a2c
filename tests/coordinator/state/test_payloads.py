"""coordinator.state.payloads.PayloadLifetime: files are deleted off the request path, drawn-up files only after
their grace period, and a failed delete never stops the deleter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlfleet.coordinator.state.payloads import CONSUMED_GRACE_SECONDS, PayloadLifetime
from rlfleet.shared.storage.local import LocalStore


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def lifetime(store: LocalStore) -> Iterator[PayloadLifetime]:
    made = PayloadLifetime(store)
    yield made
    made.close()


def test_queued_files_are_deleted_by_the_deleter(store: LocalStore, lifetime: PayloadLifetime) -> None:
    paths = [f"chunks/t/c{i}.msgpack" for i in range(3)]
    for path in paths:
        store.put(path, b"x")
    lifetime.delete(paths)
    lifetime.flush()
    assert [store.size(p) for p in paths] == [None] * 3 and lifetime.deleted == 3


def test_drawn_up_files_outlive_the_draw_by_the_grace_period(store: LocalStore, lifetime: PayloadLifetime) -> None:
    store.put("chunks/t/used.msgpack", b"x")
    lifetime.consumed(100.0, ["chunks/t/used.msgpack"])()  # the draw is durable at once
    lifetime.expire_consumed(100.0 + CONSUMED_GRACE_SECONDS - 1)
    lifetime.flush()
    assert store.size("chunks/t/used.msgpack") is not None and lifetime.in_grace() == {"chunks/t/used.msgpack"}
    lifetime.expire_consumed(100.0 + CONSUMED_GRACE_SECONDS)
    lifetime.flush()
    assert store.size("chunks/t/used.msgpack") is None and lifetime.in_grace() == set()


def test_files_of_a_draw_not_yet_durable_are_kept_past_the_grace(store: LocalStore,
                                                                 lifetime: PayloadLifetime) -> None:
    store.put("chunks/t/used.msgpack", b"x")
    durable = lifetime.consumed(100.0, ["chunks/t/used.msgpack"])
    lifetime.expire_consumed(100.0 + 10 * CONSUMED_GRACE_SECONDS)
    lifetime.flush()
    assert store.size("chunks/t/used.msgpack") is not None and lifetime.in_grace() == {"chunks/t/used.msgpack"}
    durable()  # its grace counts from the draw
    lifetime.expire_consumed(100.0 + CONSUMED_GRACE_SECONDS)
    lifetime.flush()
    assert store.size("chunks/t/used.msgpack") is None and lifetime.in_grace() == set()


def test_files_of_an_undone_draw_are_never_deleted_by_it(store: LocalStore, lifetime: PayloadLifetime) -> None:
    store.put("chunks/t/used.msgpack", b"x")
    lifetime.consumed(100.0, ["chunks/t/used.msgpack"])  # its commit failed: the durable action never runs
    lifetime.undone()
    lifetime.expire_consumed(100.0 + 10 * CONSUMED_GRACE_SECONDS)
    lifetime.flush()
    assert store.size("chunks/t/used.msgpack") is not None and lifetime.in_grace() == set()


def test_a_file_already_gone_does_not_stop_the_deleter(store: LocalStore, lifetime: PayloadLifetime) -> None:
    store.put("chunks/t/b.msgpack", b"x")
    lifetime.delete(["chunks/t/never-written.msgpack", "chunks/t/b.msgpack"])
    lifetime.flush()
    assert store.size("chunks/t/b.msgpack") is None
