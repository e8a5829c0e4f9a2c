"""A small uint8 image env for payload tests: every frame distinct, episodes of varied length, and faults on
request (an exception, or a frame of another shape, at a given step of every episode).

Frames are 6x7 with `channels` channels, first or last (0: grayscale 6x7 frames, as Atari's); each pixel is a hash
of (seed, episode, step, pixel), so a stack rebuilt from the wrong frames cannot pass for the right one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

H, W = 6, 7


class Frames(gym.Env):
    action_space = gym.spaces.Discrete(3)

    def __init__(self, channels: int = 1, channels_first: bool = True, max_steps: int = 9, raise_at: int = 0,
                 reshape_at: int = 0) -> None:
        self.shape = (H, W) if channels == 0 else (channels, H, W) if channels_first else (H, W, channels)
        self.observation_space = gym.spaces.Box(0, 255, self.shape, np.uint8)
        self.max_steps, self.raise_at, self.reshape_at = max_steps, raise_at, reshape_at
        self.episode = self.t = self.length = 0
        self.key = 0

    def _frame(self) -> np.ndarray:
        size = int(np.prod(self.shape))
        grown = (self.shape[0] + 1, *self.shape[1:])
        shape = grown if self.reshape_at and self.t == self.reshape_at else self.shape
        rng = np.random.default_rng([self.key, self.episode, self.t])
        return rng.integers(0, 256, max(size, int(np.prod(shape))), dtype=np.uint8)[:int(np.prod(shape))].reshape(
            shape)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.key = seed
        self.episode += 1
        self.t = 0
        self.length = int(self.np_random.integers(2, self.max_steps + 1))  # terminates after this many steps
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        if self.raise_at and self.t == self.raise_at:
            raise RuntimeError(f"a fault at step {self.t}")
        return self._frame(), float(action), self.t >= self.length, False, {}


def frames_env(frames: int, **kwargs: Any) -> Any:
    """The env section of a Frames env under `frame_stack` (a shared.config.env.EnvConfig)."""
    from rlfleet.shared.config.env import EnvConfig

    return EnvConfig.model_validate({"id": "tests.support.frames:Frames", "kwargs": kwargs, "solve_threshold": None,
                                     "wrappers": [{"name": "frame_stack", "frames": frames}]})


def twin_rollouts(frames: int, num_envs: int = 3, seed: int = 5, **kwargs: Any) -> tuple[Any, Any]:
    """Two rollouts of the same seeded Frames run acting at random: the first writes the compact chunks its run's
    schema asks for, the second the flat layout (obs and next_obs on every row) of the very same steps."""
    from rlfleet.collector_worker.rollout import Rollout
    from rlfleet.shared.envs.build import make_env
    from rlfleet.shared.envs.gymspaces import describe
    from rlfleet.shared.payloads.schema import ChunkSchema
    from rlfleet.shared.policy.manifest import Behaviour

    env = frames_env(frames, **kwargs)
    single = make_env(env)
    spaces = describe(single)
    single.close()
    behaviour = Behaviour(head="q_values", sample=False)
    compact, flat = (Rollout(env, num_envs, spaces, behaviour, seed) for _ in range(2))
    flat.schema = ChunkSchema.of(spaces, behaviour_logp=False)
    return compact, flat
