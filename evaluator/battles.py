"""Won / drawn / lost of a policy against one opponent of a two-player game (shared/envs/two_player.py): a baseline,
or another policy (a self-play pool version).

A game's return is +1, 0 or -1 from the policy's seat, so the evaluator's own greedy episodes (evaluator/
episodes.py: every env plays the same number of games, every started game is finished) count wins, draws and
losses once the env's opponent is fixed to the one asked for. Seats alternate game by game in each env.

The policy is played through its actor's `greedy` and `reset`: a policy with a recurrent core begins every game,
in every env, from a zero memory, as it does every episode of training, never with what it remembered of the
game before (or of the games against the previous opponent). A pool version playing the other seat has a memory
of its own per game (shared/envs/selfplay.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

import numpy as np

from rlfleet.evaluator.episodes import evaluate
from rlfleet.shared.config.battle import BattleBar, SelfPlayConfig
from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.envs.selfplay import PolicyPlayer, game_space, set_opponents
from rlfleet.shared.envs.two_player import Player
from rlfleet.shared.policy.actors import PolicyError, build_actor
from rlfleet.shared.policy.files import MAX_POLICY_BYTES, decode_policy
from rlfleet.shared.policy.manifest import ManifestError
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore
from rlfleet.shared.wire import BattleRecord, PolicyRef

log = logging.getLogger("rlfleet.evaluator")


class Playing(Protocol):
    """What plays the policy's seat: an actor (shared/policy/actors.py), or anything with its two calls."""

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Moves for observations [N, ...]."""
        ...

    def reset(self, done: np.ndarray | None = None) -> None:
        """Forget the games of the envs where `done` is true (None: of every env), whose next move begins one."""
        ...


def games_against(policy: Playing, env: EnvConfig, opponent: str, games: int, num_envs: int, seed: int,
                  player: Player | None = None) -> tuple[list[float], list[int]]:
    """(returns, lengths) of `games` greedy games against `opponent` alone, whatever mixture the run trained
    against: a baseline by name, or `player` under that name."""
    if player is None:
        fixed = env.model_copy(update={"kwargs": {**env.kwargs, "opponent": opponent}})
        return evaluate(policy.greedy, fixed, num_envs, games, seed, reset=policy.reset)
    return evaluate(policy.greedy, env, num_envs, games, seed, reset=policy.reset,
                    setup=lambda vec: set_opponents(vec, {opponent: 1.0}, {opponent: player}))


def against(policy: Playing, env: EnvConfig, opponent: str, games: int, num_envs: int, seed: int,
            player: Player | None = None) -> BattleRecord:
    returns, _ = games_against(policy, env, opponent, games, num_envs, seed, player)
    return BattleRecord.of(opponent, returns)


def baseline_games(policy: Playing, env: EnvConfig, against: Mapping[str, BattleBar], games: int, num_envs: int,
                   seed: int) -> tuple[list[float], list[int]]:
    """The games of a battle rule's validation or test: `games` against each of its baselines, in its order
    (the coordinator's judge reads the returns block by block)."""
    returns: list[float] = []
    lengths: list[int] = []
    for opponent in against:
        r, n = games_against(policy, env, opponent, games, num_envs, seed)
        returns += r
        lengths += n
    return returns, lengths


def pool_records(policy: Playing, env: EnvConfig, pool: list[PolicyRef], store: PayloadStore, self_play: SelfPlayConfig,
                 own: int, num_envs: int, seed: int) -> list[BattleRecord]:
    """Games against a sample of the pool's versions (never `own`), `eval_pool_games` each. A version whose file
    cannot be read is skipped with a warning naming it."""
    others = [ref for ref in pool if ref.version != own]
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(len(others), min(len(others), self_play.eval_pool_versions), replace=False).tolist())
    games = self_play.eval_pool_games
    envs = max(d for d in range(1, num_envs + 1) if games % d == 0)  # every env plays as many games
    if not picked:
        return []
    records: list[BattleRecord] = []
    space = game_space(env)
    for ref in (others[k] for k in picked):
        try:
            manifest, state = decode_policy(store.get(ref.path, ref.sha256, max_bytes=MAX_POLICY_BYTES))
            actor = build_actor(manifest, state)
        except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
            log.warning("opponent pool: policy v%d (%s) cannot be played; left out of v%d's games: %s", ref.version,
                        ref.path, own, exc)
            continue
        name = f"v{ref.version}"
        player = PolicyPlayer(actor, space, self_play.opponent_epsilon, np.random.default_rng([seed, ref.version]))
        records.append(against(policy, env, name, games, envs, seed, player))
    return records
