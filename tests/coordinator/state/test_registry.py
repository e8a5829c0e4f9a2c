"""coordinator.state.registry.Registry: registration, leases renewed by heartbeats, expiry."""

from __future__ import annotations

import re

from rlfleet.coordinator.state.registry import Registry
from rlfleet.shared.ids import ID_PATTERN


def test_register_assigns_unique_valid_ids_and_a_lease() -> None:
    reg = Registry(lease_seconds=10.0)
    a = reg.register("collector", "host-a", now=100.0)
    b = reg.register("collector", "host-a", now=100.0)
    c = reg.register("learner", "gpu", now=101.0)
    assert len({a.worker_id, b.worker_id, c.worker_id}) == 3
    assert a.worker_id.startswith("collector-") and c.worker_id.startswith("learner-")
    for w in (a, b, c):
        assert re.fullmatch(ID_PATTERN, w.worker_id)  # usable as an Id on the wire
        assert w.task_id is None
    assert (a.kind, a.name, a.last_seen, a.lease_expires) == ("collector", "host-a", 100.0, 110.0)
    assert c.lease_expires == 111.0
    assert reg.get(a.worker_id) is a
    assert reg.get("collector-999-ffffff") is None
    assert set(reg.workers) == {a.worker_id, b.worker_id, c.worker_id}


def test_renew_extends_the_lease_from_now() -> None:
    reg = Registry(lease_seconds=5.0)
    w = reg.register("evaluator", "e", now=0.0)
    reg.renew(w, now=3.0)
    assert (w.last_seen, w.lease_expires) == (3.0, 8.0)
    assert reg.expire(now=7.9) == []
    assert reg.get(w.worker_id) is w


def test_expire_removes_exactly_the_lapsed_workers() -> None:
    reg = Registry(lease_seconds=10.0)
    old = reg.register("collector", "old", now=0.0)
    fresh = reg.register("collector", "fresh", now=5.0)
    assert reg.expire(now=9.999) == []
    gone = reg.expire(now=10.0)  # a lease ends at its expiry instant
    assert gone == [old]
    assert reg.get(old.worker_id) is None
    assert reg.get(fresh.worker_id) is fresh
    assert reg.expire(now=10.0) == []  # already removed: reported once
    assert reg.expire(now=100.0) == [fresh]
    assert reg.workers == {}


def test_expired_worker_keeps_its_task_id_for_the_caller() -> None:
    reg = Registry(lease_seconds=1.0)
    w = reg.register("collector", "c", now=0.0)
    w.task_id = "collector-0"
    (gone,) = reg.expire(now=2.0)
    assert gone.task_id == "collector-0"  # the run releases this task


def test_heartbeat_keeps_a_worker_alive_indefinitely() -> None:
    reg = Registry(lease_seconds=4.0)
    w = reg.register("learner", "l", now=0.0)
    for t in range(1, 100, 3):  # heartbeat every 3 s, lease 4 s
        assert reg.expire(now=float(t)) == []
        reg.renew(w, now=float(t))
    assert reg.get(w.worker_id) is w
