"""The wrappers an env section may list (`env.wrappers`), each a small model picked by its `name`.

They are applied in the order listed, on top of the env and its time limit, with gymnasium's own wrappers.
Reward transforms are `training_only`: the rewards written into chunks for the learner are transformed, but
the evaluator builds its envs without them and collectors report returns recorded beneath them
(see `rlfleet.shared.envs.build.make_env`), so every return a user sees is the environment's own. A wrapper that is
applied everywhere but changes rewards or episode ends in training only (`atari`: reward clipping, a lost life
ending the episode) says so with `transforms_training` and gets `training` in `wrap`.

gymnasium is imported inside `wrap`: these models are part of the run config, which the coordinator loads
without ever loading gymnasium.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field, JsonValue, field_validator

from rlfleet.shared.config.base import Strict
from rlfleet.shared.config.envcheck import EnvSectionError

if TYPE_CHECKING:
    import gymnasium as gym


class _Wrapper(Strict):
    TRAINING_ONLY: ClassVar[bool] = False  # a reward transform: what users see stays the env's own
    # Observations leave the wrapper as they came in, so a frame stack before it still makes the run's observations
    # (shared/config/plan.py: the compact chunk layout).
    KEEPS_OBS: ClassVar[bool] = False

    @property
    def training_only(self) -> bool:
        """Whether the wrapper is left out of the envs the evaluator plays (a reward transform, say)."""
        return self.TRAINING_ONLY

    @property
    def transforms_training(self) -> bool:
        """Whether training sees other rewards or episode ends than the env's own: then collectors record the
        env's own episodes beneath the wrappers and report those (shared/envs/build.py: RAW_EPISODE)."""
        return self.training_only

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        raise NotImplementedError


class ClipActions(_Wrapper):
    """Clip continuous actions into the action space's bounds before the env sees them.

    The declared space keeps its bounds: gymnasium's ClipAction would declare an unbounded one, which a run
    cannot be planned for (policy heads are sized from the bounds)."""

    name: Literal["clip_actions"] = "clip_actions"
    """The wrapper's name in the env's wrappers list."""
    KEEPS_OBS: ClassVar[bool] = True

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        import numpy as np
        from gymnasium.spaces import Box
        from gymnasium.wrappers import TransformAction

        space = env.action_space
        if not isinstance(space, Box):
            raise ValueError(f"needs a continuous (Box) action space, but this env's is {space}: remove the wrapper")
        return TransformAction(env, lambda action: np.clip(action, space.low, space.high), space)


class FrameStack(_Wrapper):
    """Observe the last `frames` observations stacked on a new first axis (dtype kept: uint8 images stay uint8).

    A stack of integer observations stays integer: k Discrete(n) observations are a MultiDiscrete of k n's, a
    MultiDiscrete or MultiBinary gains the new first axis (gymnasium would describe the last two as an integer
    Box, which the policy would read as numbers instead of one-hot / binary), and a Dict or Tuple stacks each
    entry so."""

    name: Literal["frame_stack"] = "frame_stack"
    """The wrapper's name in the env's wrappers list."""
    frames: Annotated[int, Field(ge=1, le=1024, description="observations per stack")]

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        from gymnasium.spaces import Box
        from gymnasium.wrappers import FrameStackObservation

        stacked = FrameStackObservation(env, self.frames)
        if not isinstance(env.observation_space, Box):
            stacked.observation_space = _stacked_space(env.observation_space, self.frames)
        return stacked


def _stacked_space(space: gym.Space, frames: int) -> gym.Space:
    """The space of `frames` observations of `space` stacked on a new first axis, integer leaves kept integer."""
    import numpy as np
    from gymnasium import spaces
    from gymnasium.vector.utils import batch_space

    if isinstance(space, spaces.Discrete):
        return spaces.MultiDiscrete(np.full(frames, space.n), start=np.full(frames, space.start))
    if isinstance(space, spaces.MultiDiscrete):
        shape = (frames, *space.nvec.shape)
        return spaces.MultiDiscrete(np.broadcast_to(space.nvec, shape), start=np.broadcast_to(space.start, shape))
    if isinstance(space, spaces.MultiBinary):
        return spaces.MultiBinary([frames, *space.shape])
    if isinstance(space, spaces.Dict):
        return spaces.Dict({key: _stacked_space(sub, frames) for key, sub in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return spaces.Tuple(tuple(_stacked_space(sub, frames) for sub in space.spaces))
    return batch_space(space, frames)


class ObsFilter(_Wrapper):
    """Keep part of each observation: `keep` lists indices of a Box observation's last axis (in the order given)
    or positions of a Tuple's, or keys of a Dict's. CartPole without its velocities (rl-baselines3-zoo's
    CartPoleNoVel-v1) is CartPole-v1 with `{name: obs_filter, keep: [0, 2]}`: a partially observable env made
    from a config, not from a copy of the env's code. Indices or keys the env does not have are refused when the
    config loads, naming the ones it has."""

    name: Literal["obs_filter"] = "obs_filter"
    """The wrapper's name in the env's wrappers list."""
    keep: tuple[Annotated[int, Field(ge=0)], ...] | tuple[str, ...] = Field(min_length=1, description=(
        "indices of a Box observation's last axis or a Tuple's positions (0-based), or keys of a Dict observation, "
        "to keep, in this order"))

    @field_validator("keep")
    @classmethod
    def _once_each(cls, keep: tuple[int, ...] | tuple[str, ...]) -> tuple[int, ...] | tuple[str, ...]:
        repeated = sorted({str(k) for k in keep if keep.count(k) > 1})  # type: ignore[arg-type]
        if repeated:
            raise ValueError(f"keep lists {', '.join(repeated)} more than once: list each index or key once")
        return keep

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        import numpy as np
        from gymnasium.spaces import Box, Dict, Tuple
        from gymnasium.wrappers import FilterObservation, TransformObservation

        space = env.observation_space
        if isinstance(space, Dict):
            names = list(space.spaces)
            if not all(isinstance(k, str) for k in self.keep):
                raise ValueError(f"the observation is a Dict: keep its keys, some of {names}")
            unknown = [k for k in self.keep if k not in space.spaces]
            if unknown:
                raise ValueError(f"keep {unknown}: the observation has no such key; its keys are {names}")
            return FilterObservation(env, list(self.keep))
        size = len(space.spaces) if isinstance(space, Tuple) else (space.shape[-1] if isinstance(space, Box) and
                                                                   space.shape else None)
        if size is None:
            raise ValueError(f"needs a Box, Tuple or Dict observation, but this env's is {space}: remove the wrapper")
        indices = [k for k in self.keep if isinstance(k, int)]
        what = "positions of the Tuple" if isinstance(space, Tuple) else f"indices of the last axis of {space}"
        if len(indices) != len(self.keep):
            raise ValueError(f"keep names keys, but the observation is not a Dict: keep {what}, 0 to {size - 1}")
        outside = [k for k in indices if k >= size]
        if outside:
            raise ValueError(f"keep {outside}: the observation has {size} {what.split(' of')[0]}, keep some of 0 to "
                             f"{size - 1}")
        if isinstance(space, Tuple):
            return FilterObservation(env, indices)
        assert isinstance(space, Box)
        columns = np.asarray(indices)
        kept = Box(space.low[..., columns], space.high[..., columns], dtype=space.dtype)  # type: ignore[arg-type]
        return TransformObservation(env, lambda obs: np.asarray(obs)[..., columns], kept)


class ScaleReward(_Wrapper):
    """Multiply every reward by a constant, for training only."""

    name: Literal["scale_reward"] = "scale_reward"
    """The wrapper's name in the env's wrappers list."""
    scale: Annotated[float, Field(gt=0, description="factor applied to each training reward")]
    TRAINING_ONLY: ClassVar[bool] = True
    KEEPS_OBS: ClassVar[bool] = True

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        from gymnasium.wrappers import TransformReward

        return TransformReward(env, lambda reward: self.scale * float(reward))


class NormalizeReward(_Wrapper):
    """Divide every training reward by a running estimate of the standard deviation of the discounted return, as
    SB3's VecNormalize and rl-baselines3-zoo's `normalize: true` do (gymnasium's NormalizeReward, per env).

    Why: with returns in the tens or hundreds, the critic's loss dwarfs the actor's, and under a global gradient
    norm clip it shrinks the actor's step too. Unlike the observation statistics, these never reach a policy: no
    actor needs them to act, so each collector's env keeps its own, and the evaluator plays without them."""

    name: Literal["normalize_reward"] = "normalize_reward"
    """The wrapper's name in the env's wrappers list."""
    gamma: Annotated[float, Field(gt=0, le=1, description=(
        "discount of the return whose spread rewards are divided by: the algorithm's gamma, as rl-zoo does"))] = 0.99
    TRAINING_ONLY: ClassVar[bool] = True
    KEEPS_OBS: ClassVar[bool] = True

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        from gymnasium.wrappers import NormalizeReward as Normalize

        return Normalize(env, gamma=self.gamma)


class NormalizeObs(_Wrapper):
    """Normalise observations (their Box parts: one-hot and binary parts are left as they are) with running
    statistics owned by the learner, applied by every actor alike.

    The env itself is left as it is: payloads hold raw observations, the learner folds the observations it
    trains on into running statistics and freezes them into each published policy's manifest, and every
    actor (collectors, the evaluator) normalises with the manifest's statistics only. So a scaled-out
    collector can never act with statistics of its own (learner_worker/obsnorm.py)."""

    name: Literal["normalize_obs"] = "normalize_obs"
    """The wrapper's name in the env's wrappers list."""
    clip: Annotated[float, Field(gt=0, le=1e6, description="normalised observations are clipped to +-clip")] = 10.0

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        import numpy as np
        from gymnasium.spaces import Box

        from rlfleet.shared.envs.gymspaces import leaves

        space = env.observation_space
        if isinstance(space, Box) and space.dtype == np.uint8:
            raise ValueError(f"needs float (Box) observations, but this env's are {space}: images are scaled to "
                             f"[0, 1] already; remove the wrapper")
        if not any(isinstance(leaf, Box) for _, leaf in leaves(space, "")):
            raise ValueError(f"normalises the Box parts of an observation, and this env's ({space}) has none: "
                             f"Discrete, MultiDiscrete and MultiBinary parts are encoded one-hot or 0/1 already; "
                             f"remove the wrapper")
        return env


class Atari(_Wrapper):
    """Atari 2600 preprocessing as Mnih et al. (2015), rl-baselines3-zoo and SB3's AtariWrapper do it, on an env
    from ale-py (an `ALE/...` id): random no-op starts, frame skipping with max-pooling over the last two frames,
    grayscale frames resized to `screen_size` x `screen_size` uint8, FIRE pressed after each reset in games that
    need it; in training only, a lost life ends the episode and rewards are clipped to their sign. Collectors still
    report, and the evaluator plays, whole games with the game's own score.

    Frames come out 2-D (no channel axis): list `{name: frame_stack, frames: 4}` after it for the usual 4-frame
    stack (channels first), which the CNN encoders read as an image.

    The env must not skip frames itself: ale-py's `ALE/...-v5` ids skip 4 frames by default, so give them
    `env.kwargs: {frameskip: 1}` (and, as rl-zoo's NoFrameskip-v4 games, `repeat_action_probability: 0.0`; ALE's
    default 0.25 keeps sticky actions). A section without `frameskip: 1` is refused before the run starts."""

    name: Literal["atari"] = "atari"
    """The wrapper's name in the env's wrappers list."""
    noop_max: Annotated[int, Field(ge=0, le=1000, description=(
        "a reset takes a random number of no-op actions in [1, noop_max], so episodes start in different "
        "states; 0: none"))] = 30
    frame_skip: Annotated[int, Field(ge=1, le=16, description=(
        "frames each action is repeated for; the observation is the pixel-wise max of the last two"))] = 4
    screen_size: Annotated[int, Field(ge=8, le=512, description="frames are resized to this many pixels square")] = 84
    terminal_on_life_loss: bool = True
    """Training only: a lost life ends the learner's episode (the game goes on; it is not reset)."""
    clip_reward: bool = True
    """Training only: rewards are clipped to their sign (-1, 0, +1), so one learning rate suits every game."""
    fire_on_reset: bool = True
    """Press FIRE after each reset in games whose action 1 is FIRE (Breakout, Pong), as rl-zoo does."""

    @property
    def transforms_training(self) -> bool:
        return self.terminal_on_life_loss or self.clip_reward

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        import numpy as np
        from gymnasium.wrappers import AtariPreprocessing, TransformReward

        from rlfleet.shared.envs.atari import FireOnReset, LifeLossTerminal, fires_on_reset

        game = env.unwrapped
        if not hasattr(game, "ale"):
            raise ValueError(f"needs an Atari env from ale-py (an 'ALE/...' id such as ALE/Pong-v5 with kwargs "
                             f"frameskip: 1), but {env.spec.id if env.spec else type(game).__name__} is not one: "
                             f"remove the wrapper (use frame_stack alone for other image envs)")
        if self.frame_skip > 1 and getattr(game, "_frameskip", None) != 1:
            raise ValueError(f"the env skips frames itself (frameskip {getattr(game, '_frameskip', None)}; ALE v5 "
                             f"ids skip 4 by default), so every action would last {self.frame_skip} x that many: "
                             f"set env.kwargs.frameskip: 1")
        try:
            import cv2  # noqa: F401  AtariPreprocessing resizes with it
        except ImportError as exc:
            raise ValueError("needs opencv-python-headless: install the atari extra, pip install "
                             "'rlfleet[atari]'") from exc
        env = AtariPreprocessing(env, noop_max=self.noop_max, frame_skip=self.frame_skip,
                                 screen_size=self.screen_size, terminal_on_life_loss=False)
        if training and self.terminal_on_life_loss:
            env = LifeLossTerminal(env)
        if self.fire_on_reset and fires_on_reset(env):
            env = FireOnReset(env)
        if training and self.clip_reward:
            env = TransformReward(env, lambda reward: float(np.sign(float(reward))))
        return env


class Gymnasium(_Wrapper):
    """Any gymnasium-style wrapper by its import path, called as `call(env, **kwargs)`: one of gymnasium's
    (`{name: gymnasium, call: "gymnasium.wrappers:TimeAwareObservation"}`) or your own
    (`call: "my_pkg.wrappers:Shaping", kwargs: {bonus: 0.1}`).

    The list of named wrappers above covers what rlfleet itself must know about (frame stacks it stores compactly,
    statistics the learner owns); anything else a user's env needs goes through this entry rather than a factory
    module written around the env. A wrapper that changes rewards for training only says `only_in_training: true`,
    so the evaluator plays, and users see, the env's own returns."""

    name: Literal["gymnasium"] = "gymnasium"
    """The wrapper's name in the env's wrappers list."""
    call: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description=(
        "the wrapper's class or factory, 'package.module:Name', called with the env and `kwargs`"))
    kwargs: dict[str, JsonValue] = Field(default_factory=dict, description="keyword arguments after the env")
    only_in_training: bool = Field(False, description=(
        "true: training envs only (a reward transform, say); the evaluator's envs and the returns users see "
        "are the env's own"))

    @property
    def training_only(self) -> bool:
        return self.only_in_training

    def wrap(self, env: gym.Env, training: bool) -> gym.Env:
        from gymnasium import Wrapper

        from rlfleet.shared.envs.build import load_entry_point  # build imports this module: on first use

        wrapped = load_entry_point(self.call)(env, **self.kwargs)
        if not isinstance(wrapped, Wrapper):
            raise ValueError(f"{self.call}(env, ...) returned {type(wrapped).__name__}, not a gymnasium wrapper of "
                             f"the env")
        return wrapped


WrapperConfig = Annotated[ClipActions | FrameStack | ObsFilter | ScaleReward | NormalizeReward | NormalizeObs | Atari
                          | Gymnasium, Field(discriminator="name")]


def apply_wrappers(env: gym.Env, wrappers: Sequence[WrapperConfig], training: bool) -> gym.Env:
    """Wrap `env` in `wrappers`, in order, leaving out the training-only ones unless `training`.

    A wrapper that does not fit the env raises EnvSectionError naming it (env.wrappers[i])."""
    for i, wrapper in enumerate(wrappers):
        if wrapper.training_only and not training:
            continue
        try:
            env = wrapper.wrap(env, training)
        except Exception as exc:
            raise EnvSectionError(f"wrappers[{i}]", f"{wrapper.name}: {exc}") from exc
    return env
