"""The wrappers an env section may list (`env.wrappers`), each a small model picked by its `name`.

They are applied in the order listed, on top of the env and its time limit, with gymnasium's own wrappers.
Reward transforms are `training_only`: the rewards written into chunks for the learner are transformed, but
the evaluator builds its envs without them and collectors report returns recorded beneath them
(see `shared.envs.build.make_env`), so every return a user sees is the environment's own.

gymnasium is imported inside `wrap`: these models are part of the run config, which the coordinator loads
without ever loading gymnasium.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field

from shared.config.base import Strict
from shared.config.envcheck import EnvSectionError

if TYPE_CHECKING:
    import gymnasium as gym


class _Wrapper(Strict):
    training_only: ClassVar[bool] = False

    def wrap(self, env: gym.Env) -> gym.Env:
        raise NotImplementedError


class ClipActions(_Wrapper):
    """Clip continuous actions into the action space's bounds before the env sees them.

    The declared space keeps its bounds: gymnasium's ClipAction would declare an unbounded one, which a run
    cannot be planned for (policy heads are sized from the bounds)."""

    name: Literal["clip_actions"] = "clip_actions"
    """The wrapper's name in the env's wrappers list."""

    def wrap(self, env: gym.Env) -> gym.Env:
        import numpy as np
        from gymnasium.spaces import Box
        from gymnasium.wrappers import TransformAction

        space = env.action_space
        if not isinstance(space, Box):
            raise ValueError(f"needs a continuous (Box) action space, but this env's is {space}: remove the wrapper")
        return TransformAction(env, lambda action: np.clip(action, space.low, space.high), space)


class FrameStack(_Wrapper):
    """Observe the last `frames` observations stacked on a new first axis (dtype kept: uint8 images stay uint8)."""

    name: Literal["frame_stack"] = "frame_stack"
    """The wrapper's name in the env's wrappers list."""
    frames: Annotated[int, Field(ge=1, le=1024, description="observations per stack")]

    def wrap(self, env: gym.Env) -> gym.Env:
        from gymnasium.wrappers import FrameStackObservation

        return FrameStackObservation(env, self.frames)


class ScaleReward(_Wrapper):
    """Multiply every reward by a constant, for training only."""

    name: Literal["scale_reward"] = "scale_reward"
    """The wrapper's name in the env's wrappers list."""
    scale: Annotated[float, Field(gt=0, description="factor applied to each training reward")]
    training_only: ClassVar[bool] = True

    def wrap(self, env: gym.Env) -> gym.Env:
        from gymnasium.wrappers import TransformReward

        return TransformReward(env, lambda reward: self.scale * float(reward))


class NormalizeObs(_Wrapper):
    """Normalise observations with running statistics owned by the learner, applied by every actor alike.

    The env itself is left as it is: payloads hold raw observations, the learner folds the observations it
    trains on into running statistics and freezes them into each published policy's manifest, and every
    actor (collectors, the evaluator) normalises with the manifest's statistics only. So a scaled-out
    collector can never act with statistics of its own (learner_worker/obsnorm.py)."""

    name: Literal["normalize_obs"] = "normalize_obs"
    """The wrapper's name in the env's wrappers list."""
    clip: Annotated[float, Field(gt=0, le=1e6, description="normalised observations are clipped to +-clip")] = 10.0

    def wrap(self, env: gym.Env) -> gym.Env:
        import numpy as np
        from gymnasium.spaces import Box

        space = env.observation_space
        if not isinstance(space, Box) or space.dtype == np.uint8:
            raise ValueError(f"needs float (Box) observations, but this env's are {space}: images are scaled to "
                             f"[0, 1] already; remove the wrapper")
        return env


WrapperConfig = Annotated[ClipActions | FrameStack | ScaleReward | NormalizeObs, Field(discriminator="name")]


def apply_wrappers(env: gym.Env, wrappers: Sequence[WrapperConfig], training: bool) -> gym.Env:
    """Wrap `env` in `wrappers`, in order, leaving out the training-only ones unless `training`.

    A wrapper that does not fit the env raises EnvSectionError naming it (env.wrappers[i])."""
    for i, wrapper in enumerate(wrappers):
        if wrapper.training_only and not training:
            continue
        try:
            env = wrapper.wrap(env)
        except Exception as exc:
            raise EnvSectionError(f"wrappers[{i}]", f"{wrapper.name}: {exc}") from exc
    return env
