"""Self-play's opponent pool in the coordinator: which versions join and leave, files pinned against the policy
book's deletions, the pool kept across a restart, the route, and training games counted by opponent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.state.opponents import Opponents
from rlfleet.shared.config.battle import SelfPlayConfig
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import EpisodeStat, PolicyRef
from tests.support.api import assert_error_body, auth, make_settings, running_client
from tests.support.components import JournalFor
from tests.support.run import chunk, collector, learner, publish, settle_files

SELF_PLAY = {"every_versions": 3, "pool_size": 2}


def selfplay_config(base: RunConfig, **self_play: Any) -> RunConfig:
    data = base.model_dump()
    data["env"] = {"id": "rlfleet/TicTacToe-v0"}
    data["self_play"] = {**SELF_PLAY, **self_play}
    return RunConfig.model_validate(data)


def ref(version: int) -> PolicyRef:
    return PolicyRef(version=version, path=f"policies/v{version:08d}.safetensors", sha256="ab" * 32)


def test_every_kth_version_joins_and_the_newest_stay() -> None:
    pool = Opponents(SelfPlayConfig(every_versions=3, pool_size=2))
    left = [pool.published(ref(v)) for v in range(1, 13)]
    assert [p.version for p in pool.pool] == [9, 12]
    assert [p.version for lost in left for p in lost] == [3, 6]  # each left when a newer one pushed it out
    assert Opponents(None).published(ref(3)) == [] and not Opponents(None).enabled


def test_a_pinned_version_outlives_the_book_and_goes_once_both_let_it_go() -> None:
    pool = Opponents(SelfPlayConfig(every_versions=3, pool_size=1))
    pool.published(ref(3))
    assert pool.unpinned(dropped=[ref(3)], left=[], book={4, 5}) == []  # the book dropped v3, the pool holds it
    left = pool.published(ref(6))
    assert pool.unpinned(dropped=[ref(4)], left=left, book={5, 6}) == [ref(4).path, ref(3).path]
    assert pool.unpinned(dropped=[ref(6)], left=[ref(6)], book=set()) == [ref(6).path]  # one deletion each


@pytest.fixture
def selfplay_run(make_run: Callable[..., Run], run_config: RunConfig) -> Run:
    return make_run(selfplay_config(run_config), keep_policies=2)


def test_pool_versions_stay_in_the_store_after_the_book_drops_them(selfplay_run: Run, store: LocalStore) -> None:
    lrn = learner(selfplay_run)
    refs = [publish(selfplay_run, store, lrn, v) for v in range(1, 11)]
    settle_files(selfplay_run)
    kept = {v for v, r in enumerate(refs, start=1) if store.size(r.path) is not None}
    assert kept == {6, 9, 10}  # the book's newest 2 (9, 10) and the pool (6, 9); v3 left the pool at v9
    reply = selfplay_run.ctx.opponents.reply(selfplay_run.ctx.policies.committed)
    assert [p.version for p in reply.pool] == [6, 9] and reply.latest is not None and reply.latest.version == 10


def test_the_pool_survives_a_coordinator_restart(make_run: Callable[..., Run], run_config: RunConfig,
                                                 store: LocalStore, tmp_path: Path) -> None:
    config = selfplay_config(run_config)
    first = make_run(config, journal=Journal(tmp_path / "run.sqlite"), keep_policies=2)
    lrn = learner(first)
    for v in range(1, 8):
        publish(first, store, lrn, v)
    first.ctx.close()
    second = make_run(config, journal=Journal(tmp_path / "run.sqlite"), keep_policies=2)
    assert [p.version for p in second.ctx.opponents.pool] == [3, 6]
    publish(second, store, lrn, 9)  # the learner's registration survived the restart too
    settle_files(second)
    assert [p.version for p in second.ctx.opponents.pool] == [6, 9]
    assert store.size(f"policies/v{3:08d}.safetensors") is None  # it left the pool after the restart: deleted


def test_a_pool_version_deleted_behind_the_coordinators_back_leaves_the_pool(selfplay_run: Run, store: LocalStore,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    lrn = learner(selfplay_run)
    refs = [publish(selfplay_run, store, lrn, v) for v in range(1, 7)]
    (store.root / refs[2].path).unlink()  # v3, pinned by the pool: an operator cleaned the store by hand
    reply = asyncio.run(selfplay_run.publishing.opponents_reply())
    assert [p.version for p in reply.pool] == [6]
    assert "policy v3 (policies/v00000003.safetensors) is no longer in the store" in caplog.text
    status = selfplay_run.status().self_play
    assert status is not None and (status.pool_versions, status.pool_missing) == ([6], 1)
    assert [p.version for p in asyncio.run(selfplay_run.publishing.opponents_reply()).pool] == [6]  # counted once


def test_training_games_are_counted_by_the_kind_of_opponent(selfplay_run: Run) -> None:
    worker, task = collector(selfplay_run)
    games = [EpisodeStat(ret=r, length=5, opponent=o) for r, o in
             [(1.0, "random"), (-1.0, "random"), (0.0, "latest"), (1.0, "v3"), (-1.0, "v6"), (0.0, "lookahead")]]
    report = chunk(selfplay_run, worker, task, "c1", returns=[g.ret for g in games], episodes=games)
    selfplay_run.chunks.ingest(report)
    status = selfplay_run.status().self_play
    assert status is not None
    counts = {kind: (t.wins, t.draws, t.losses) for kind, t in status.training.items()}
    assert counts == {"random": (1, 0, 1), "latest": (0, 1, 0), "pool": (1, 0, 1), "lookahead": (0, 1, 0)}


def test_a_run_without_self_play_has_no_pool_and_its_route_says_so(run: Run) -> None:
    assert run.status().self_play is None and run.ctx.opponents.state_dict() is None


def test_the_opponents_route(tmp_path: Path, run_config: RunConfig) -> None:
    config = selfplay_config(run_config)
    config_file = tmp_path / "selfplay.yaml"
    config_file.write_text(dump_run_config(config))
    settings, tokens = make_settings(tmp_path / "sp", config=config_file, run=config.name)
    with running_client(settings) as client:
        reply = client.get("/v1/policies/opponents", headers=auth(tokens["read"]))
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"latest": None, "pool": [], "weights": SelfPlayConfig().weights}
    settings, tokens = make_settings(tmp_path / "plain")
    with running_client(settings) as client:
        assert_error_body(client.get("/v1/policies/opponents", headers=auth(tokens["read"])), 409, "conflict")


def test_joining_and_forgetting_mark_the_pool_and_versions_not_due_and_reads_do_not() -> None:
    pool = Opponents(SelfPlayConfig(every_versions=3, pool_size=2))
    pool.published(ref(1))
    pool.holds(1)
    pool.unpinned(dropped=[ref(1)], left=[], book={2})
    pool.reply(ref(1))
    pool.status({}, None, None)
    assert not pool.pending.dirty
    pool.published(ref(3))
    assert pool.pending.dirty and pool.pending.rows == []
    pool.pending.clear()
    pool.forget([ref(3)])
    assert pool.pending.dirty and pool.pool == [] and pool.missing == 1


def test_the_pool_survives_a_round_trip(tmp_path: Path) -> None:
    config = SelfPlayConfig(every_versions=3, pool_size=2)
    pool = Opponents(config)
    journal = JournalFor(tmp_path / "journal.sqlite", pool)
    for version in range(1, 10):
        pool.published(ref(version))
    pool.forget([ref(6)])
    journal.commit()
    restored = journal.restore(Opponents(config), now=0.0)
    assert (restored.pool, restored.missing) == ([ref(9)], 1)
    assert restored.state_dict() == pool.state_dict()


def test_a_run_without_self_play_journals_no_pool_and_loads_an_empty_one(tmp_path: Path) -> None:
    pool = Opponents(None)
    journal = JournalFor(tmp_path / "journal.sqlite", pool)
    pool.pending.mark()  # a new run journals every component's state
    journal.commit()
    stored = journal.stored()
    assert stored.meta is None  # nothing written under `pool`
    restored = Opponents(SelfPlayConfig())  # a journal from before self-play, resumed with it
    restored.load_state_dict(stored, now=0.0)
    assert (restored.pool, restored.missing) == ([], 0)
