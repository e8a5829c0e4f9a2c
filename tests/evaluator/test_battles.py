"""The evaluator's two-player games: a battle rule's games block by block, the rule as the judge applies it, games
against sampled pool versions (an unreadable one skipped with a warning), and a recurrent policy's memory zeroed
at the start of every game it plays."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from rlfleet.evaluator.battles import against, baseline_games, pool_records
from rlfleet.shared.config.base import CoreConfig
from rlfleet.shared.config.battle import BattleBar, SelfPlayConfig
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.policy.actors import Actor, build_actor
from rlfleet.shared.policy.files import save_policy
from rlfleet.shared.policy.manifest import PolicyManifest
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import BattleRecord, PolicyRef, rule_met, rule_records
from tests.support.policies import manifest, policy_state, random_actor

CONFIG = RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {}})
SPACES = RunPlan.of(CONFIG).spaces
RULE = {"random": BattleBar(min_win_or_draw=0.95), "lookahead": BattleBar(min_win=0.6)}


def met(returns: list[float]) -> bool:
    """The rule on a validation's returns, block by block, as the evaluator and the judge read them."""
    return rule_met(RULE, rule_records(RULE, returns))


class FirstLegal:
    """Plays the first legal cell (the mask leads the flat observation); remembers nothing."""

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        return np.argmax(obs[:, SPACES.mask_slice] > 0, axis=1)

    def reset(self, done: np.ndarray | None = None) -> None:
        pass


def test_a_rule_is_played_baseline_by_baseline_and_judged_per_block() -> None:
    first_legal = FirstLegal()
    returns, lengths = baseline_games(first_legal, CONFIG.env, RULE, 20, 4, seed=3)
    assert len(returns) == len(lengths) == 40
    assert BattleRecord.of("random", returns[:20]) == against(first_legal, CONFIG.env, "random", 20, 4, 3)
    assert BattleRecord.of("lookahead", returns[20:]) == against(first_legal, CONFIG.env, "lookahead", 20, 4, 3)
    assert met([1.0] * 19 + [-1.0] + [1.0] * 12 + [0.0] * 8)  # 0.95 and 0.6 exactly
    assert not met([1.0] * 18 + [-1.0] * 2 + [1.0] * 20)
    assert not met([1.0] * 20 + [1.0] * 11 + [0.0] * 9)


def test_pool_versions_are_sampled_never_the_version_itself_and_an_unreadable_one_is_skipped(
        tmp_path: Path, caplog) -> None:
    store = LocalStore(tmp_path)
    m = manifest(SPACES, "q_values", (16,))
    refs = [save_policy(store, v, {k: torch.from_numpy(a) for k, a in policy_state(m, v).items()}, m)
            for v in (2, 4)]
    gone = PolicyRef(version=6, path="policies/v00000006.safetensors", sha256="cd" * 32)
    act = random_actor(SPACES, hidden=(16,))
    self_play = SelfPlayConfig(eval_pool_versions=3, eval_pool_games=6)
    with caplog.at_level(logging.WARNING, "rlfleet.evaluator"):
        records = pool_records(act, CONFIG.env, [*refs, gone], store, self_play, own=4, num_envs=4, seed=0)
    assert [(r.opponent, r.games) for r in records] == [("v2", 6)]  # v4 is itself; v6's file is gone
    assert "policy v6 (policies/v00000006.safetensors) cannot be played" in caplog.text
    assert pool_records(act, CONFIG.env, refs, store, SelfPlayConfig(eval_pool_versions=0), 2, 4, 0) == []


def recurrent(seed: int) -> tuple[PolicyManifest, dict[str, np.ndarray]]:
    """A tic-tac-toe Q policy with a GRU core, randomly initialised: its memory of a game is never all zero."""
    m = manifest(SPACES, "q_values", (16,)).model_copy(update={"core": CoreConfig(kind="gru", hidden=8)})
    return m, policy_state(m, seed)


def opening(obs: np.ndarray) -> np.ndarray:
    """Per row: whether it is the player's first move of its game (eight or nine cells free: no stone of its own)."""
    return (obs[:, SPACES.mask_slice] > 0).sum(axis=1) >= 8


class Watched:
    """A recurrent actor whose memory is read before every move: its size at each game's first move, and later."""

    def __init__(self, actor: Actor) -> None:
        self.actor = actor
        self.at_openings: list[float] = []
        self.later: list[float] = []

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        memory = self.actor.core_state(len(obs))
        assert memory is not None
        size = np.abs(memory).max(axis=1)
        first = opening(obs)
        self.at_openings += size[first].tolist()
        self.later += size[~first].tolist()
        return self.actor.greedy(obs)

    def reset(self, done: np.ndarray | None = None) -> None:
        self.actor.reset(done)


def test_a_recurrent_policy_begins_every_battle_game_from_a_zero_memory(tmp_path: Path) -> None:
    """Baseline games (a battle rule's validation and test, `rlfleet test`) and pool games: several games at once,
    one after another in each env and opponent after opponent; the memory it carries within a game is gone at the
    next game's first move, in every env."""
    watched = Watched(build_actor(*recurrent(1)))
    baseline_games(watched, CONFIG.env, RULE, 20, 4, seed=3)
    assert len(watched.at_openings) >= 40 and max(watched.at_openings) == 0.0
    assert min(watched.later) > 0.0  # within a game it remembers: the zeros above are resets, not a dead core

    store = LocalStore(tmp_path)
    m, state = recurrent(2)
    ref = save_policy(store, 2, {k: torch.from_numpy(a) for k, a in state.items()}, m)
    watched = Watched(build_actor(*recurrent(1)))
    (record,) = pool_records(watched, CONFIG.env, [ref], store, SelfPlayConfig(eval_pool_games=8), 4, 4, 0)
    assert record.games == 8 and len(watched.at_openings) >= 8 and max(watched.at_openings) == 0.0
