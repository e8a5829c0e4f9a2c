"""The vector env a collector steps, built by the backend `collector.env_backend` names.

Every backend gives the rollout the same contract as `make_vector_env`'s SyncVectorEnv: SAME_STEP autoreset (a
finished episode's last observation in info['final_obs'], the returned observation already the next episode's
first), env i seeded `seed + i` by the first reset, env errors contained where the env can raise them:

- `sync`: every env stepped in turn in the collector's own process. Nothing to start, nothing to copy.
- `async`: gymnasium's AsyncVectorEnv, one subprocess per env, observations in shared memory. Envs step in
  parallel, and while they step the collector's process is free (for the policy: collector_worker/stepping.py).
  ResetOnError wraps each env inside its subprocess, so a user env that raises is reset there and counted as an
  env error, as in the sync backend. Subprocesses start by "forkserver": a fork of the collector itself would
  copy torch's thread pools mid-use (a known way to deadlock), and "spawn" starts each child from scratch where
  forkserver forks them from one clean, already-importing server.
- `envpool`: EnvPool's C++ envs on its own thread pool, for an env section EnvPool reproduces: an id EnvPool has
  under the same name, no wrappers (they wrap Python envs; EnvPool's are not), no kwargs (EnvPool's constructor
  takes its own). EnvPool autoresets on the step after an episode ends (NEXT_STEP); `EnvPoolVectorEnv` resets
  the finished envs at once instead, which gives the same SAME_STEP transitions. Its C++ envs have no user code
  to raise and no float observations to go non-finite, so ResetOnError has nothing to contain there.

`backend_problem` says, before a run starts, why a section cannot have the backend asked for (the preflight asks
it in a child interpreter: shared/config/backendcheck.py); `make_collector_env` raises EnvBackendError with the
same message when one is built anyway.
"""

from __future__ import annotations

import functools
import importlib.util
import multiprocessing
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.hints import did_you_mean
from rlfleet.shared.config.run_config import EnvBackend
from rlfleet.shared.envs.build import ResetOnError, make_env, make_vector_env

SUBPROCESS_CONTEXT = "forkserver"
ENVPOOL_SEEDS = 2**31  # EnvPool takes int32 seeds


class EnvBackendError(ValueError):
    """The env section cannot be stepped by the backend `collector.env_backend` names; the message says why and
    what would work."""

    def __init__(self, backend: EnvBackend, problem: str) -> None:
        super().__init__(f"collector.env_backend: {backend}: {problem}")


def make_collector_env(env: EnvConfig, num_envs: int, backend: EnvBackend) -> VectorEnv:
    """`num_envs` training envs of the section, env errors contained, stepped by `backend`."""
    if backend == "sync":
        return make_vector_env(env, num_envs, reset_on_error=True)
    if backend == "async":
        return make_async_env(env, num_envs)
    return EnvPoolVectorEnv(env, num_envs)


def make_async_env(env: EnvConfig, num_envs: int) -> AsyncVectorEnv:
    """gymnasium's AsyncVectorEnv over `num_envs` subprocesses, each env wrapped in ResetOnError inside its own.

    The fork server imports this module (gymnasium, the env builder) once, before it forks any env process:
    otherwise each would import them itself, ~1 s apiece (measured 13 s against 4-6 s for 4 envs on this
    2-core machine under load)."""
    multiprocessing.get_context(SUBPROCESS_CONTEXT).set_forkserver_preload([__name__])
    return AsyncVectorEnv([functools.partial(_contained_env, env) for _ in range(num_envs)], shared_memory=True,
                          context=SUBPROCESS_CONTEXT, autoreset_mode=AutoresetMode.SAME_STEP)


def _contained_env(env: EnvConfig) -> gym.Env:
    """One training env of the section under ResetOnError: what each async subprocess builds and steps."""
    return ResetOnError(make_env(env, training=True))


def backend_problem(env: EnvConfig, backend: EnvBackend) -> str | None:
    """Why `backend` cannot step the env section (the message names collector.env_backend and what would work),
    or None when it can. Only envpool can be refused: sync and async step whatever builds."""
    if backend != "envpool":
        return None
    try:
        envpool_task(env)
    except EnvBackendError as exc:
        return str(exc)
    return None


def envpool_task(env: EnvConfig) -> str:
    """The EnvPool task id that reproduces the env section; EnvBackendError saying why there is none."""
    if importlib.util.find_spec("envpool") is None:
        raise EnvBackendError("envpool", "EnvPool is not installed here: install rlfleet's envpool extra "
                                         "(pip install 'rlfleet[envpool]') in every collector, or set "
                                         "collector.env_backend: async")
    if env.wrappers:
        names = ", ".join(wrapper.name for wrapper in env.wrappers)
        raise EnvBackendError("envpool", f"env.wrappers ({names}) wrap Python envs, and EnvPool's are C++ envs "
                                         f"that take none; drop the wrappers or set collector.env_backend: async")
    if env.kwargs:
        raise EnvBackendError("envpool", f"env.kwargs {sorted(env.kwargs)} are the gymnasium env's arguments, "
                                         f"not EnvPool's; drop them or set collector.env_backend: async")
    import envpool

    tasks = envpool.list_all_envs()
    if env.id.startswith("ALE/"):
        raise EnvBackendError("envpool", f"EnvPool's Atari games ({env.id[4:]}) are not {env.id}: they preprocess "
                                         f"and stack frames in C++ their own way, which rlfleet does not map onto "
                                         f"env.wrappers; set collector.env_backend: async for Atari")
    if env.id not in tasks:
        raise EnvBackendError("envpool", f"EnvPool has no env {env.id!r}{did_you_mean(env.id, tasks)}: it steps "
                                         f"the ids envpool.list_all_envs() lists (CartPole-v1, Pendulum-v1, "
                                         f"HalfCheetah-v5, ...); set collector.env_backend: async for this env")
    return env.id


class EnvPoolVectorEnv(VectorEnv):
    """EnvPool's env pool with SAME_STEP autoreset and `seed + i` seeding, as a gymnasium VectorEnv.

    EnvPool is seeded when the pool is made, so a reset with a seed makes the pool afresh (a collector resets
    once, at its start). The time limit is the section's, or the gymnasium registration's where it sets none,
    so an episode ends where the sync backend's would."""

    def __init__(self, env: EnvConfig, num_envs: int) -> None:
        self.task = envpool_task(env)
        spec = gym.registry.get(env.id)
        self.max_episode_steps = env.max_episode_steps or (None if spec is None else spec.max_episode_steps)
        self.num_envs = num_envs
        self.pool = self._make_pool(seed=0)
        self.single_observation_space = self.pool.observation_space
        self.single_action_space = self.pool.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def _make_pool(self, seed: int) -> Any:
        import envpool

        kwargs: dict[str, Any] = {}
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        # Folded into int32: run seeds are wider, and EnvPool refuses what does not fit.
        return envpool.make(self.task, env_type="gymnasium", num_envs=self.num_envs, seed=seed % ENVPOOL_SEEDS,
                            **kwargs)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, list):
            raise ValueError("EnvPool seeds its envs seed, seed + 1, ...: reset with one seed")
        if seed is not None:
            self.pool.close()
            self.pool = self._make_pool(seed)
        obs, _ = self.pool.reset()
        return obs, {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, _ = self.pool.step(np.asarray(actions))
        done = terminated | truncated
        info: dict[str, Any] = {}
        if done.any():
            ended = np.flatnonzero(done)
            final_obs = np.empty(self.num_envs, dtype=object)
            for i in ended:
                final_obs[i] = obs[i].copy()
            first, _ = self.pool.reset(ended)  # the next episode begins now, as under SAME_STEP
            obs = obs.copy()
            obs[ended] = first
            info = {"final_obs": final_obs, "_final_obs": done, "final_info": {}, "_final_info": done}
        return obs, rewards.astype(np.float64), terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        self.pool.close()
