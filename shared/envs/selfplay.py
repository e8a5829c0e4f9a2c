"""Policies as players of shared/envs/two_player.py's games, and the per-game draw of opponents over the latest
version, the pool and the baselines, as collectors and the evaluator apply it to their envs.

A policy player sees the board as the policy would from its own seat: the game's observation for the player to
move, flattened the way shared/envs/build.py flattens the env's Dict observation, and acts greedily (argmax over its
legal moves; with probability `self_play.opponent_epsilon` a random legal one, so that games between two versions
vary). So a version plays either seat without knowing which it holds.

A policy with a recurrent core remembers the game so far, so a player has a memory of its own: one per game (each
env of a vector env gets its own player from `set_opponents`), zeroed when a game against it begins, and never the
memory of the actor it was made from, which may be acting in the collector's own seat at the same time.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import gymnasium as gym
import numpy as np

from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.two_player import Player, TwoPlayerEnv
from rlfleet.shared.policy.actors import Actor


class PolicyPlayer:
    """`actor` as a player of one game at a time: its greedy move, or with probability `epsilon` a uniformly random
    legal one. It acts with a shallow copy of `actor` (the same weights, read only) whose memory is its own."""

    def __init__(self, actor: Actor, space: gym.spaces.Space, epsilon: float = 0.0,
                 rng: np.random.Generator | None = None) -> None:
        self.actor = copy.copy(actor)
        self.actor.reset()  # rebinds the copy's state: the original's is never written through it
        self.space, self.epsilon = space, epsilon
        self.draws = rng if rng is not None else np.random.default_rng()

    def __call__(self, seen: dict[str, np.ndarray]) -> int:
        flat = np.asarray(gym.spaces.flatten(self.space, seen), np.float32)[None]
        move = int(self.actor.greedy(flat)[0])  # a random move too: the memory sees every position it moves from
        if self.epsilon > 0 and self.draws.random() < self.epsilon:
            return int(self.draws.choice(np.flatnonzero(seen["action_mask"])))
        return move

    def new_game(self) -> None:
        self.actor.reset()

    def another(self) -> PolicyPlayer:
        """The same policy, epsilon and random stream, with a memory of its own: for another game."""
        return type(self)(self.actor, self.space, self.epsilon, self.draws)


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
    """Each game of `vec` draws its opponents from `weights` from its next reset on; a policy player is copied per
    game, so the games played at once never share a memory."""
    for game in game_envs(vec):
        game.set_opponents(weights, {name: player.another() if isinstance(player, PolicyPlayer) else player
                                     for name, player in players.items()})
