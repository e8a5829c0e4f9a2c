"""Stepping a vector env with an epsilon-greedy Q policy into columnar chunks. No I/O, no HTTP.

terminated and truncated are kept apart: a truncated (time-limit) episode still bootstraps from its final
observation, a terminated one does not. With SAME_STEP autoreset the final observation of a finished
episode is taken from info['final_obs'], so `next_obs` is always the true successor of `obs`. A step on which
the env raised is kept with `valid=False` (the learner never trains on it) and its episode is not reported.

Two ways to act: epsilon-greedy on Q-values (DQN) or sampling from logits (PPO), which also records the
behaviour log-probability the PPO learner needs for its importance ratio. Every chunk also carries where its
episodes end and which env columns start a fresh episode, so the coordinator can serve sequences and whole
episodes without opening the payload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from shared.config import EnvConfig, NetConfig
from shared.envs import ENV_ERROR, make_vector_env, space_dims
from shared.inference import NumpyPolicy


@dataclass
class Chunk:
    arrays: dict[str, np.ndarray]
    episodes: list[tuple[float, int]] = field(default_factory=list)
    policy_version: int = 0  # the oldest policy that acted in this chunk (a newer one may take over mid-chunk)
    fresh_columns: list[int] = field(default_factory=list)  # envs whose first step here begins an episode

    @property
    def num_envs(self) -> int:
        return int(self.arrays["rewards"].shape[1])

    @property
    def ends(self) -> list[int]:
        """Flat indices (t * num_envs + env) of steps after which the env's episode does not continue."""
        a = self.arrays
        return np.flatnonzero(a["terminated"] | a["truncated"] | ~a["valid"]).tolist()

    @property
    def env_steps(self) -> int:
        return int(self.arrays["rewards"].size)

    @property
    def env_errors(self) -> int:
        return int((~self.arrays["valid"]).sum())


class Rollout:
    def __init__(self, env: EnvConfig, num_envs: int, net: NetConfig, seed: int, sample: bool = False) -> None:
        self.env = make_vector_env(env, num_envs, reset_on_error=True)
        self.num_envs = num_envs
        self.obs_dim, self.n_actions = space_dims(self.env)
        self.rng = np.random.default_rng(seed)
        self.policy = NumpyPolicy(self.obs_dim, self.n_actions, net, self.rng)
        self.version = 0
        self.sample = sample
        self.obs, _ = self.env.reset(seed=seed)
        self.ep_return = np.zeros(num_envs)
        self.ep_length = np.zeros(num_envs, dtype=np.int64)

    def load_state(self, state: dict[str, np.ndarray], version: int = 0) -> None:
        self.policy.load(state)
        self.version = version

    def act(self, obs: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray | None]:
        """(actions, behaviour log-probs or None when acting epsilon-greedily)."""
        if self.sample:
            return self.policy.sample(obs, self.rng)
        actions = self.policy.greedy(obs)
        explore = self.rng.random(self.num_envs) < epsilon
        if explore.any():
            actions[explore] = self.rng.integers(0, self.n_actions, size=int(explore.sum()))
        return actions, None

    def collect(self, steps: int, epsilon: float, episodes_target: int | None = None,
                refresh: Callable[[], None] | None = None) -> Chunk:
        """Step `steps` times (n_sample), or until `episodes_target` episodes finished, at most `steps` (n_episode).

        `refresh` runs before every step, so a newly published policy takes over mid-chunk."""
        n, d = self.num_envs, self.obs_dim
        first_version = self.version
        fresh = np.flatnonzero(self.ep_length == 0).tolist()
        obs = np.empty((steps, n, d), np.float32)
        next_obs = np.empty((steps, n, d), np.float32)
        actions = np.empty((steps, n), np.int64)
        rewards = np.empty((steps, n), np.float32)
        terminated = np.empty((steps, n), bool)
        truncated = np.empty((steps, n), bool)
        valid = np.ones((steps, n), bool)
        logp = np.zeros((steps, n), np.float32)
        episodes: list[tuple[float, int]] = []
        finished = 0
        t = 0
        while t < steps and (episodes_target is None or finished < episodes_target):
            if refresh is not None:
                refresh()
            obs[t] = self.obs
            actions[t], step_logp = self.act(self.obs, epsilon)
            if step_logp is not None:
                logp[t] = step_logp
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
                finished += int(done.sum())
                self.ep_return[done] = 0.0
                self.ep_length[done] = 0
            t += 1
        arrays: dict[str, np.ndarray] = {"obs": obs, "actions": actions, "rewards": rewards, "terminated": terminated,
                                         "truncated": truncated, "next_obs": next_obs, "valid": valid}
        if self.sample:
            arrays["logp"] = logp
        if t < steps:
            arrays = {k: v[:t] for k, v in arrays.items()}
        return Chunk(arrays, episodes, first_version, fresh)

    def close(self) -> None:
        self.env.close()
