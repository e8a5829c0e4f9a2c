"""Policies as players of shared/envs/two_player.py's games, and the per-game draw of opponents over the latest
version, the pool and the baselines, as collectors and the evaluator apply it to their envs.

A policy player sees the board as the policy would from its own seat: the game's observation for the player to
move, flattened the way shared/envs/build.py flattens the env's Dict observation, and acts greedily (argmax over its
legal moves; with probability `self_play.opponent_epsilon` a random legal one, so that games between two versions
vary). So a version plays either seat without knowing which it holds.
"""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np

from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.two_player import Player, TwoPlayerEnv
from rlfleet.shared.policy.actors import Actor


def policy_player(actor: Actor, space: gym.spaces.Space, epsilon: float = 0.0,
                  rng: np.random.Generator | None = None) -> Player:
    """`actor` as a player: its greedy move, or with probability `epsilon` a uniformly random legal one."""
    draws = rng if rng is not None else np.random.default_rng()

    def move(seen: dict[str, np.ndarray]) -> int:
        if epsilon > 0 and draws.random() < epsilon:
            return int(draws.choice(np.flatnonzero(seen["action_mask"])))
        flat = np.asarray(gym.spaces.flatten(space, seen), np.float32)[None]
        return int(actor.greedy(flat)[0])

    return move


def game_space(env: EnvConfig) -> gym.spaces.Space:
    """The observation space of the env section's game, as its players see it (the Dict before flattening)."""
    made = make_env(env, training=False)
    try:
        return game_envs_of([made])[0].observation_space
    finally:
        made.close()


def game_envs_of(envs: list[gym.Env]) -> list[TwoPlayerEnv]:
    games = [env.unwrapped for env in envs]
    for game in games:
        if not isinstance(game, TwoPlayerEnv):
            raise ValueError(f"self-play needs shared/envs/two_player.py's games, not {type(game).__name__}")
    return games  # type: ignore[return-value]


def game_envs(vec: gym.vector.SyncVectorEnv) -> list[TwoPlayerEnv]:
    """The games inside a vector env's wrappers."""
    return game_envs_of(list(vec.envs))


def draw_weights(weights: Mapping[str, float], latest: bool, pool: list[str]) -> dict[str, float]:
    """Per-opponent draw weights: `latest` if a policy is there to play it, each pool version an even share of
    the pool's weight, each baseline its own; kinds with nothing to play are left out."""
    drawn: dict[str, float] = {}
    for kind, weight in weights.items():
        if weight <= 0:
            continue
        if kind == "latest":
            if latest:
                drawn["latest"] = weight
        elif kind == "pool":
            drawn.update({name: weight / len(pool) for name in pool})
        else:
            drawn[kind] = weight
    return drawn


def set_opponents(vec: gym.vector.SyncVectorEnv, weights: Mapping[str, float], players: Mapping[str, Player]) -> None:
    for game in game_envs(vec):
        game.set_opponents(weights, players)
