"""The evaluator's two-player games: a battle rule's games block by block, the rule as the judge applies it, and
games against sampled pool versions (an unreadable one skipped with a warning)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from rlfleet.evaluator.battles import against, baseline_games, pool_records
from rlfleet.shared.config.battle import BattleBar, SelfPlayConfig
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.policy.files import save_policy
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import BattleRecord, PolicyRef, rule_met, rule_records
from tests.support.policies import manifest, policy_state, random_actor

CONFIG = RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"}, "self_play": {}})
SPACES = RunPlan.of(CONFIG).spaces
RULE = {"random": BattleBar(min_win_or_draw=0.95), "lookahead": BattleBar(min_win=0.6)}


def met(returns: list[float]) -> bool:
    """The rule on a validation's returns, block by block, as the evaluator and the judge read them."""
    return rule_met(RULE, rule_records(RULE, returns))


def first_legal(obs: np.ndarray) -> np.ndarray:
    """Plays the first legal cell (the mask leads the flat observation)."""
    return np.argmax(obs[:, SPACES.mask_slice] > 0, axis=1)


def test_a_rule_is_played_baseline_by_baseline_and_judged_per_block() -> None:
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
    act = random_actor(SPACES, hidden=(16,)).greedy
    self_play = SelfPlayConfig(eval_pool_versions=3, eval_pool_games=6)
    with caplog.at_level(logging.WARNING, "rlfleet.evaluator"):
        records = pool_records(act, CONFIG.env, [*refs, gone], store, self_play, own=4, num_envs=4, seed=0)
    assert [(r.opponent, r.games) for r in records] == [("v2", 6)]  # v4 is itself; v6's file is gone
    assert "policy v6 (policies/v00000006.safetensors) cannot be played" in caplog.text
    assert pool_records(act, CONFIG.env, refs, store, SelfPlayConfig(eval_pool_versions=0), 2, 4, 0) == []
