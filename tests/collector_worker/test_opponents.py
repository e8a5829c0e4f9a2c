"""A self-play collector's opponents: the pool is asked for when a version is due to have joined it, pool versions
play the other seat as loaded policies (an unreadable one is left out with a warning), the latest version plays
as the collector's own actor, and every finished game names its opponent."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from rlfleet.collector_worker.opponents import OpponentDraw
from rlfleet.collector_worker.rollout import Rollout
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.policy.files import decode_policy
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import OpponentPool, PolicyRef
from rlfleet.shared.worker.client import CoordinatorRejected
from tests.support.fake_coordinator import FakeCoordinator, make_session, reply
from tests.support.policies import manifest, policy_state

CONFIG = RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"},
                                   "self_play": {"every_versions": 3, "pool_size": 4,
                                                 "weights": {"latest": 1, "pool": 1, "random": 1}}})
PLAN = RunPlan.of(CONFIG)


def write_policy(store: LocalStore, version: int) -> PolicyRef:
    import torch

    from rlfleet.shared.policy.files import save_policy

    m = manifest(PLAN.spaces, "q_values", (16,))
    state = {k: torch.from_numpy(v) for k, v in policy_state(m, seed=version).items()}
    return save_policy(store, version, state, m)


@pytest.fixture
def world(tmp_path: Path):
    store = LocalStore(tmp_path / "store")
    pool = [write_policy(store, 3), PolicyRef(version=6, path="policies/v00000006.safetensors", sha256="ab" * 32)]
    latest = write_policy(store, 7)
    fake = FakeCoordinator()
    fake.handlers["opponents"] = lambda request: reply(OpponentPool(latest=latest, pool=pool,
                                                                    weights=dict(CONFIG.self_play.weights)))
    session = make_session(fake, "collector")
    session.register()
    rollout = Rollout(CONFIG.env, 4, PLAN.spaces, PLAN.behaviour, seed=0)
    yield store, fake, session, rollout, latest
    rollout.close()
    session.client.close()


def test_games_are_played_against_the_latest_the_pool_and_the_baselines(world, caplog) -> None:
    store, fake, session, rollout, latest = world
    draw = OpponentDraw(session, store, rollout, CONFIG.self_play, seed=0)
    draw.refresh()  # no policy yet: baselines only, nothing asked
    assert fake.of("opponents") == []
    rollout.load_policy(*decode_policy(store.get(latest.path, latest.sha256)), version=7)
    with caplog.at_level(logging.WARNING, "rlfleet.collector"):
        draw.refresh()
    assert len(fake.of("opponents")) == 1
    assert "policy v6 (policies/v00000006.safetensors) cannot be played" in caplog.text  # its file is gone
    opponents = set()
    for _ in range(8):
        chunk = rollout.collect(64, epsilon=0.1)
        opponents |= {opponent for _, _, opponent in chunk.episodes}
    assert opponents == {"latest", "v3", "random"}  # weights name no lookahead; v6 cannot be played


def test_the_pool_is_asked_for_only_when_a_version_is_due_to_have_joined(world) -> None:
    store, fake, session, rollout, latest = world
    draw = OpponentDraw(session, store, rollout, CONFIG.self_play, seed=0)
    policy = decode_policy(store.get(latest.path, latest.sha256))
    for version, asked in ((7, 1), (8, 1), (9, 2), (11, 2), (13, 3)):  # 9 and 12 join (every 3rd); 13 crossed 12
        rollout.load_policy(*policy, version=version)
        draw.refresh()
        assert len(fake.of("opponents")) == asked, version


def test_a_pool_that_cannot_be_fetched_ends_the_collector_loudly(world) -> None:
    store, fake, session, rollout, latest = world
    fake.handlers["opponents"] = lambda request: httpx.Response(409, json={"error": "conflict", "message": "no"})
    draw = OpponentDraw(session, store, rollout, CONFIG.self_play, seed=0)
    rollout.load_policy(*decode_policy(store.get(latest.path, latest.sha256)), version=7)
    with pytest.raises(CoordinatorRejected, match="409"):
        draw.refresh()
