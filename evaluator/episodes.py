"""Greedy evaluation episodes split evenly over the envs.

Each env plays exactly episodes/num_envs episodes, and every started episode is finished: stopping at the
first N finished episodes overall would over-sample short ones and bias the mean downward for good policies.
Envs are built without training-only wrappers (scale_reward), so returns are the environment's raw ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from gymnasium.vector import SyncVectorEnv

from shared.config import EnvConfig
from shared.envs import make_vector_env

Act = Callable[[np.ndarray], np.ndarray]  # observations -> greedy actions
Setup = Callable[[SyncVectorEnv], None]  # adjusts the envs before their first reset (self-play's opponents)


def evaluate(act: Act, env: EnvConfig, num_envs: int, episodes: int, seed: int,
             setup: Setup | None = None) -> tuple[list[float], list[int]]:
    per_env = episodes // num_envs
    vec = make_vector_env(env, num_envs, training=False)
    try:
        if setup is not None:
            setup(vec)
        obs, _ = vec.reset(seed=seed)
        ret = np.zeros(num_envs)
        length = np.zeros(num_envs, dtype=np.int64)
        done_count = np.zeros(num_envs, dtype=np.int64)
        returns: list[float] = []
        lengths: list[int] = []
        while (done_count < per_env).any():
            obs, rew, term, trunc, _ = vec.step(act(obs))
            ret += rew
            length += 1
            for i in np.flatnonzero(term | trunc):
                if done_count[i] < per_env:
                    returns.append(float(ret[i]))
                    lengths.append(int(length[i]))
                    done_count[i] += 1
                ret[i], length[i] = 0.0, 0
        return returns, lengths
    finally:
        vec.close()
