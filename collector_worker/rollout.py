"""Stepping a vector env with an epsilon-greedy Q policy into columnar chunks. No I/O, no HTTP.

terminated and truncated are kept apart: a truncated (time-limit) episode still bootstraps from its final
observation, a terminated one does not. With SAME_STEP autoreset the final observation of a finished
episode is taken from info['final_obs'], so `next_obs` is always the true successor of `obs`. A step on which
the env raised is kept with `valid=False` (the learner never trains on it) and its episode is not reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from shared.envs import ENV_ERROR, make_vector_env, space_dims
from shared.nets import greedy_actions, q_network


@dataclass
class Chunk:
    arrays: dict[str, np.ndarray]
    episodes: list[tuple[float, int]] = field(default_factory=list)

    @property
    def env_steps(self) -> int:
        return int(self.arrays["rewards"].size)

    @property
    def env_errors(self) -> int:
        return int((~self.arrays["valid"]).sum())


class Rollout:
    def __init__(self, env_id: str, num_envs: int, hidden: tuple[int, ...], seed: int) -> None:
        self.env = make_vector_env(env_id, num_envs, reset_on_error=True)
        self.num_envs = num_envs
        self.obs_dim, self.n_actions = space_dims(self.env)
        torch.manual_seed(seed)
        self.net = q_network(self.obs_dim, self.n_actions, hidden)
        self.rng = np.random.default_rng(seed)
        self.obs, _ = self.env.reset(seed=seed)
        self.ep_return = np.zeros(num_envs)
        self.ep_length = np.zeros(num_envs, dtype=np.int64)

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.net.load_state_dict(state)

    def act(self, obs: np.ndarray, epsilon: float) -> np.ndarray:
        actions = greedy_actions(self.net, obs).numpy()
        explore = self.rng.random(self.num_envs) < epsilon
        if explore.any():
            actions[explore] = self.rng.integers(0, self.n_actions, size=int(explore.sum()))
        return actions

    def collect(self, steps: int, epsilon: float) -> Chunk:
        n, d = self.num_envs, self.obs_dim
        obs = np.empty((steps, n, d), np.float32)
        next_obs = np.empty((steps, n, d), np.float32)
        actions = np.empty((steps, n), np.int64)
        rewards = np.empty((steps, n), np.float32)
        terminated = np.empty((steps, n), bool)
        truncated = np.empty((steps, n), bool)
        valid = np.ones((steps, n), bool)
        episodes: list[tuple[float, int]] = []
        for t in range(steps):
            obs[t] = self.obs
            actions[t] = self.act(self.obs, epsilon)
            self.obs, rew, term, trunc, info = self.env.step(actions[t])
            rewards[t], terminated[t], truncated[t] = rew, term, trunc
            next_obs[t] = self.obs
            self.ep_return += rew
            self.ep_length += 1
            done = term | trunc
            if done.any():
                failed = info.get("final_info", {}).get("_" + ENV_ERROR, np.zeros(n, bool))
                valid[t] = ~failed
                for i in np.flatnonzero(done):
                    next_obs[t, i] = info["final_obs"][i]
                    if not failed[i]:  # a broken episode's return means nothing: drop it
                        episodes.append((float(self.ep_return[i]), int(self.ep_length[i])))
                self.ep_return[done] = 0.0
                self.ep_length[done] = 0
        arrays: dict[str, np.ndarray] = {"obs": obs, "actions": actions, "rewards": rewards, "terminated": terminated,
                                         "truncated": truncated, "next_obs": next_obs, "valid": valid}
        return Chunk(arrays, episodes)

    def close(self) -> None:
        self.env.close()
