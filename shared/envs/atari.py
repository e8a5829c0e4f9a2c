"""The gymnasium wrappers behind the env section's `atari` wrapper (shared/envs/wrappers.py: Atari) that gymnasium
itself lacks in the form rlfleet needs.

gymnasium's AtariPreprocessing(terminal_on_life_loss=True) resets the whole game after every lost life, so an
agent trained under it never sees a second life and every recorded "episode" is one life. These do what
Stable-Baselines3's EpisodicLifeEnv and FireResetEnv do instead: a lost life ends the *training* episode, but
the game goes on, so the episode statistics recorded beneath (shared/envs/build.py: RAW_EPISODE) are whole
games. Imported only where envs are built: the config models must load without gymnasium.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

NOOP = 0


def lives(env: gym.Env) -> int:
    return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]


def action_meanings(env: gym.Env) -> list[str]:
    return list(env.unwrapped.get_action_meanings())  # type: ignore[attr-defined]


class LifeLossTerminal(gym.Wrapper):
    """A lost life terminates the episode the learner sees (no bootstrapping over a death), while the game itself
    continues: resetting after a lost life takes one no-op step instead of restarting the game. Only a game that
    really ended (or was truncated, or an explicit seed or options) resets the game."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        self._game_over = True  # until the step returns: a game whose step raised (ResetOnError) restarts whole
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        now = lives(self.env)
        if 0 < now < self._lives:
            terminated = True
        self._lives = now
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if self._game_over or seed is not None or options is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:  # the no-op itself ended the game
                obs, info = self.env.reset()
        self._game_over = False
        self._lives = lives(self.env)
        return obs, info


class FireOnReset(gym.Wrapper):
    """Press FIRE (then UP, action 2) after every reset, as SB3's FireResetEnv: games such as Breakout stand still
    until FIRE is pressed, which an untrained policy may take thousands of frames to find. Only for games whose
    action 1 is FIRE (Pong, Breakout: what rl-zoo's AtariWrapper checks)."""

    FIRE, UP = 1, 2

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (self.FIRE, self.UP):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


def fires_on_reset(env: gym.Env) -> bool:
    """Whether the game's action 1 is FIRE (and an action 2 follows), the games FireOnReset applies to."""
    meanings = action_meanings(env)
    return len(meanings) >= 3 and meanings[FireOnReset.FIRE] == "FIRE"
