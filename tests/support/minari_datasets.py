"""Minari datasets for tests, made locally with Minari's own writer (`create_dataset_from_buffers`, which stores
episodes as DataCollector does; DataCollector itself needs jax, the `minari[create]` extra, which rlfleet does not
install): CartPole-v1 episodes of the
balancing rule (sign(angle + 0.5 · angular velocity): all 500 steps, truncated) or of uniformly random actions
(short, terminated). Point MINARI_DATASETS_PATH at a temporary directory first: nothing is downloaded."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np


def play_cartpole(kinds: list[str], seed: int) -> list[dict[str, np.ndarray]]:
    """One episode per kind ("balance" or "random"), from seeds seed, seed + 1, ...: Minari's episode fields."""
    env = gym.make("CartPole-v1")
    env.action_space.seed(seed)
    episodes = []
    for i, kind in enumerate(kinds):
        obs, _ = env.reset(seed=seed + i)
        observations, actions, rewards, terminations, truncations = [obs], [], [], [], []
        done = False
        while not done:
            action = int(obs[2] + 0.5 * obs[3] > 0) if kind == "balance" else int(env.action_space.sample())
            obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(float(reward))
            terminations.append(terminated)
            truncations.append(truncated)
            done = terminated or truncated
        episodes.append({"observations": np.array(observations), "actions": np.array(actions),
                         "rewards": np.array(rewards), "terminations": np.array(terminations),
                         "truncations": np.array(truncations)})
    env.close()
    return episodes


def minari_dataset(dataset_id: str, episodes: list[dict[str, np.ndarray]]) -> Any:
    """The episodes as a Minari dataset of CartPole-v1 in MINARI_DATASETS_PATH."""
    import minari
    from minari.data_collector import EpisodeBuffer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no author e-mail, no eval env
        return minari.create_dataset_from_buffers(
            dataset_id, [EpisodeBuffer(id=i, **e) for i, e in enumerate(episodes)], env="CartPole-v1",
            algorithm_name="balancing rule", author="tests")
