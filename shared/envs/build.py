"""Environments built from the env section the same way by collectors, the evaluator and the benchmark baseline."""

from __future__ import annotations

import importlib
import inspect
import logging
import math
import warnings
from collections.abc import Callable
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers import FlattenObservation, RecordEpisodeStatistics, TimeLimit, TransformObservation

import rlfleet.shared.envs.two_player  # noqa: F401 - registers rlfleet/TicTacToe-v0 and rlfleet/ConnectFour-v0
from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.envcheck import EnvSectionError
from rlfleet.shared.config.hints import did_you_mean
from rlfleet.shared.envs.wrappers import apply_wrappers

log = logging.getLogger(__name__)
# ResetOnError's finiteness check multiplies infinities by zero on purpose, and logs what it found.
warnings.filterwarnings("ignore", "invalid value encountered in dot", RuntimeWarning, __name__)
ENV_ERROR = "env_error"
RAW_EPISODE = "raw_episode"  # raw episode statistics, under training-only reward transforms
# Gymnasium id namespaces whose envs a package registers when imported: (module, its registering function or None
# where importing registers them, the rlfleet extra that installs it). Imported only when such an id is used, so
# no other env pays for ale-py or MinAtar.
NAMESPACES: dict[str, tuple[str, str | None, str]] = {
    "ALE/": ("ale_py", None, "atari"),
    "MinAtar/": ("minatar.gym", "register_envs", "minatar"),
}


class ResetOnError(gym.Wrapper):
    """An exception inside `step`, a non-finite reward or float observation, or an observation whose shape is not
    the observation space's (a frame that changes size mid-episode), resets this env instead of killing the
    process (the vector env cannot batch it) or reaching the learner.

    The failed step comes back truncated with info[ENV_ERROR] set, so the vector env starts a new episode
    and the collector can drop the broken one and leave that step out of training."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        # 0 * x is 0 for every finite x and NaN for NaN and +-inf, so one dot with zeros finds any non-finite
        # value: a third of np.isfinite(obs).all()'s cost, which took ~9% of CartPole's collection throughput.
        self._zeros: np.ndarray | None = None
        space = env.observation_space
        if isinstance(space, gym.spaces.Box) and space.dtype.kind == "f":
            self._zeros = np.zeros(space.shape, space.dtype).ravel()
        self._shape = space.shape if isinstance(space, gym.spaces.Box) else None

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            result = self.env.step(action)
            error = self._invalid(result[0], result[1])
        except Exception as exc:  # any bug in a user's env: contain it to this env
            error = f"{type(exc).__name__}: {exc}"
        if error is None:
            return result
        log.warning("environment error: %s; resetting it", error)
        obs, _ = self.env.reset()
        return obs, 0.0, False, True, {ENV_ERROR: error[:200]}

    def _invalid(self, obs: Any, reward: SupportsFloat) -> str | None:
        if not math.isfinite(reward):
            return f"non-finite reward {reward}"
        if self._shape is not None and isinstance(obs, np.ndarray) and obs.shape != self._shape:
            return f"observation of shape {list(obs.shape)}, the env's observation_space says {list(self._shape)}"
        if self._zeros is not None and isinstance(obs, np.ndarray) and math.isnan(obs.ravel().dot(self._zeros)):
            return "non-finite observation"
        return None


def make_env(env: EnvConfig, training: bool = True, render_mode: str | None = None) -> gym.Env:
    """One env as the section describes it: made from its id or entry point with its kwargs, under its time
    limit, then wrapped in its wrappers. Raises EnvSectionError naming the field at fault.

    `training=False` (the evaluator) leaves the training-only wrappers out, so its returns are the env's own.
    With them, episode statistics are recorded beneath them: info[RAW_EPISODE]['r'] at each episode end is the
    raw return that collectors report while the chunks carry the transformed rewards. (Only then: recording
    costs collectors ~7% of CartPole's steps per second.)

    `render_mode` (`rlfleet test --video`) goes to gym.make, or to an entry point whose signature takes it;
    whether the env then renders is for the caller to check: gymnasium only warns about modes an env lacks."""
    made = _image_dtype(_flat_dict(_bare_env(env, render_mode)))
    if training and records_raw_episodes(env):
        made = RecordEpisodeStatistics(made, stats_key=RAW_EPISODE)
    return apply_wrappers(made, env.wrappers, training)


def records_raw_episodes(env: EnvConfig) -> bool:
    """Whether training envs of this section record the env's own episodes beneath its wrappers (RAW_EPISODE):
    where a wrapper changes rewards or episode ends for training. A collector then reports an episode when such a
    recorded one ends (a whole Atari game), not at every episode end the learner sees (each lost life)."""
    return any(wrapper.transforms_training for wrapper in env.wrappers)


def _image_dtype(env: gym.Env) -> gym.Env:
    """Boolean observations, and integer images (three dimensions), cast once, in the env, to what rlfleet stores
    and acts on: images to uint8 where every value fits 0..255 (MinAtar's boolean 0/1 images: as many bytes as
    before), float32 otherwise. The observation space keeps its bounds, so an image's largest value (1 for
    booleans) reaches ObsSpace.image_max and the CNN scales by it (shared/envs/gymspaces.py). Flat integer
    observations stay as they are: they are described, stored and acted on as float32 already."""
    space = env.observation_space
    if (not isinstance(space, gym.spaces.Box) or space.dtype == np.uint8
            or not (space.dtype.kind == "b" or (space.dtype.kind in "iu" and len(space.shape) == 3))):
        return env
    low, high = np.asarray(space.low), np.asarray(space.high)
    image = len(space.shape) == 3 and low.min() >= 0 and high.max() <= 255
    dtype = np.uint8 if image else np.float32
    cast_space = gym.spaces.Box(low.astype(dtype), high.astype(dtype), space.shape, dtype)  # type: ignore[arg-type]
    return TransformObservation(env, lambda obs: np.asarray(obs, dtype=dtype), cast_space)


def _flat_dict(env: gym.Env) -> gym.Env:
    """Dict observations become one flat float vector (Discrete parts one-hot), in sorted key order, the same
    in every process. Images inside a Dict would lose their shape there, so those are refused instead."""
    space = env.observation_space
    if not isinstance(space, gym.spaces.Dict):
        return env
    images = [key for key, sub in space.spaces.items()
              if isinstance(sub, gym.spaces.Box) and len(sub.shape) == 3 and sub.dtype == np.uint8]
    if images:
        raise EnvSectionError("id", f"Dict observation with image entries {images}: rlfleet flattens Dict "
                                    f"observations, which would lose the images' layout; return the image alone "
                                    f"(a Box) or wrap the env to encode it")
    return FlattenObservation(env)


def _bare_env(env: EnvConfig, render_mode: str | None = None) -> gym.Env:
    """The env itself, under its time limit, before any wrapper of the section."""
    own = ":" in env.id  # 'package.module:ClassOrFactory', the user's own env; anything else is a gymnasium id
    creator = _entry_point(env.id) if own else _registered(env.id)
    kwargs: dict[str, Any] = dict(env.kwargs)
    if render_mode is not None and (not own or _takes(creator, "render_mode")):
        kwargs["render_mode"] = render_mode
    try:
        made = creator(**kwargs) if own else gym.make(env.id, max_episode_steps=env.max_episode_steps, **kwargs)
    except Exception as exc:
        field = "kwargs" if env.kwargs or isinstance(exc, TypeError) else "id"
        raise EnvSectionError(field, f"building {env.id} failed: {type(exc).__name__}: {exc}"
                                     f"{_accepts(creator)}") from exc
    if not own:
        return made  # gym.make applied the time limit
    if not isinstance(made, gym.Env):
        raise EnvSectionError("id", f"{env.id} returned a {type(made).__name__}, not a gymnasium.Env: name a "
                                    f"gymnasium.Env subclass or a function that returns an instance")
    return made if env.max_episode_steps is None else TimeLimit(made, env.max_episode_steps)


def _entry_point(entry_point: str) -> Callable[..., Any]:
    module_name, _, attr = entry_point.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise EnvSectionError("id", f"cannot import module {module_name!r} of entry point {entry_point!r} "
                                    f"({type(exc).__name__}: {exc}): install it, or put it on PYTHONPATH, in "
                                    f"every service that loads the config or runs envs") from exc
    creator = getattr(module, attr, None)
    if not callable(creator):
        names = [n for n in dir(module) if not n.startswith("_")]
        raise EnvSectionError("id", f"module {module_name!r} has no class or function {attr!r}"
                                    f"{did_you_mean(attr, names)}; write the entry point as 'module:Name'")
    return creator


def _registered(env_id: str) -> Callable[..., Any]:
    if env_id not in gym.registry:
        _register_namespace(env_id)
    spec = gym.registry.get(env_id)
    if spec is None:
        raise EnvSectionError("id", f"{env_id!r} is not a registered gymnasium id{did_you_mean(env_id, gym.registry)}"
                                    f"; for your own env give its entry point, 'package.module:ClassOrFactory'")
    try:
        entry = spec.entry_point
        return cast(Callable[..., Any], load_env_creator(entry) if isinstance(entry, str) else entry)
    except Exception as exc:  # its module does not import: a missing optional dependency, say
        raise EnvSectionError("id", f"{env_id} cannot be loaded: {type(exc).__name__}: {exc}") from exc


def _register_namespace(env_id: str) -> None:
    """Register the envs of the package that owns `env_id`'s namespace (NAMESPACES), if it has one."""
    for prefix, (module_name, function, extra) in NAMESPACES.items():
        if not env_id.startswith(prefix):
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise EnvSectionError("id", f"{env_id} needs {module_name.partition('.')[0]} ({exc}): install the "
                                        f"{extra} extra, pip install 'rlfleet[{extra}]', in every service that "
                                        f"runs envs") from exc
        if function is not None:
            getattr(module, function)()
        else:
            gym.register_envs(module)
        return


def _takes(creator: Callable[..., Any], name: str) -> bool:
    """Whether `creator` accepts the keyword argument `name` (by name or through **kwargs)."""
    try:
        params = inspect.signature(creator).parameters.values()
    except (TypeError, ValueError):  # a builtin or C extension without a signature
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _accepts(creator: Callable[..., Any]) -> str:
    try:
        params = inspect.signature(creator).parameters
    except (TypeError, ValueError):  # a builtin or C extension without a signature
        return ""
    return f"; it accepts: {', '.join(params) or 'no arguments'}"


def make_vector_env(env: EnvConfig, num_envs: int, reset_on_error: bool = False,
                    training: bool = True) -> SyncVectorEnv:
    """`num_envs` copies of `make_env(env, training)`; `reset_on_error` contains env errors (ResetOnError).

    SAME_STEP autoreset: a finished episode's last observation comes back in info['final_obs'] and the
    returned observation is already the next episode's first, so every step is a real transition."""

    def make() -> gym.Env:
        made = make_env(env, training)
        return ResetOnError(made) if reset_on_error else made

    return SyncVectorEnv([make for _ in range(num_envs)], autoreset_mode=AutoresetMode.SAME_STEP)


_native_usable: dict[str, bool] = {}  # per env section (make_native_vector_env)


def make_native_vector_env(env: EnvConfig, num_envs: int) -> VectorEnv | None:
    """For evaluation (training-only wrappers left out, as `make_vector_env(training=False)` does): gymnasium's
    own vectorized implementation of the env (its registered `vector_entry_point`: CartPole's
    steps all its envs in one numpy expression, ~10x cheaper per env step than SyncVectorEnv's loop over
    copies), or None where the section cannot have one: the user's own entry point, a wrapper that applies
    (those wrap single envs), Dict observations (flattened per env), no such implementation, one that does
    not build here (phys2d's need jax), or one whose spaces are not the single env's. The caller falls back
    to `make_vector_env`.

    Its envs share one random generator, seeded by the first reset: env i is not seeded base + i as in a
    SyncVectorEnv. Its autoreset mode is its own (CartPole's is NEXT_STEP); callers must honour it.

    Whether a section can have one is decided once per process (the evaluator asks at every validation): a
    section refused is not built, checked or logged again."""
    key = env.model_dump_json(exclude={"solve_threshold"})
    if _native_usable.get(key) is False:
        return None
    spec = gym.registry.get(env.id)
    if (":" in env.id or any(not wrapper.training_only for wrapper in env.wrappers)
            or spec is None or spec.vector_entry_point is None or spec.additional_wrappers):
        _native_usable[key] = False
        return None
    kwargs: dict[str, Any] = dict(env.kwargs)
    if env.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env.max_episode_steps
    try:
        vec = gym.make_vec(env.id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
    except Exception as exc:  # a missing optional dependency, kwargs only the single env takes, ...
        log.info("%s: gymnasium's vectorized implementation is unavailable (%s: %s); stepping copies of the env "
                 "instead", env.id, type(exc).__name__, exc)
        _native_usable[key] = False
        return None
    if key not in _native_usable:
        resets = vec.metadata.get("autoreset_mode")
        _native_usable[key] = resets in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP) and _plays_like(vec, env)
    if not _native_usable[key]:
        vec.close()
        return None
    return vec


def _plays_like(vec: VectorEnv, env: EnvConfig) -> bool:
    """Whether the vectorized implementation takes and returns what the policy was built for, the single env's
    spaces (observation shape and dtype, the action space itself): one that preprocesses (ALE's resizes and
    stacks frames) is a different env to an actor. Observation bounds may differ (CartPole's vector env says
    inf where the single env says float32's largest value); no actor reads them."""
    single = make_env(env, training=False)
    try:
        obs, vec_obs = single.observation_space, vec.single_observation_space
        return (not isinstance(vec_obs, gym.spaces.Dict) and type(vec_obs) is type(obs)
                and vec_obs.shape == obs.shape and vec_obs.dtype == obs.dtype
                and vec.single_action_space == single.action_space)
    finally:
        single.close()
