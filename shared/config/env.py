"""The run config's env section: which environment, with which arguments, time limit and wrappers.

Validating it checks values only. The section is built once before the run starts (`preflight`,
shared/config/preflight.py), so a typo in an id, an entry point that does not import, kwargs the constructor
rejects or a wrapper that does not fit is refused before any service starts, naming the field, instead of
crashing every collector later.
"""

from __future__ import annotations

import contextlib
import math
from typing import Annotated, Final, Literal

from pydantic import Field, JsonValue, field_validator

from rlfleet.shared.config.base import Strict
from rlfleet.shared.envs.wrappers import WrapperConfig

DEFAULT_ENV_ID = "CartPole-v1"
REGISTERED: Final = "registered"  # env.solve_threshold's default: the registration's reward_threshold, if any


class EnvConfig(Strict):
    id: str = Field(DEFAULT_ENV_ID, description="a registered gymnasium id, or the entry point of your own env: "
                                                "'package.module:ClassOrFactory' (anything with a ':')")
    kwargs: dict[str, JsonValue] = Field(default_factory=dict, description="keyword arguments for the env's "
                                                                           "constructor or factory (JSON values)")
    max_episode_steps: Annotated[int | None, Field(ge=1, description="truncate episodes after this many steps "
                                                                     "(gymnasium's TimeLimit)")] = None
    wrappers: tuple[WrapperConfig, ...] = Field((), description="applied in order on top of the env: "
                                                                "clip_actions, frame_stack, obs_filter, "
                                                                "scale_reward, normalize_reward, normalize_obs, "
                                                                "atari, and any gymnasium-style wrapper as "
                                                                "{name: gymnasium, call: 'pkg.mod:Wrapper', "
                                                                "kwargs: {...}}")
    solve_threshold: float | Literal["registered"] | None = Field(REGISTERED, description=(
        "mean evaluation return that marks the run solved (the env's own return: reward wrappers such as "
        "scale_reward do not apply); "
        "null: no threshold, the run trains to its budget, keeps the best and the last policy and tests the best "
        "at the end; 'registered' (the default): the env's gymnasium registration's reward_threshold "
        "(CartPole-v1: 475), or no threshold where it registers none (shared/config/threshold.py resolves it "
        "before the run starts); not used by a two-player game with a battle rule (evaluation.against)"))

    @field_validator("solve_threshold", mode="before")
    @classmethod
    def _finite(cls, value: object) -> object:
        """One clear message for every value that is not a threshold (pydantic's union would list three)."""
        if value is None or value == REGISTERED:
            return value
        if isinstance(value, str):  # a number in quotes loaded before, as pydantic's lax mode read it
            with contextlib.suppress(ValueError):
                value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"env.solve_threshold must be a finite number, null (no threshold) or "
                             f"{REGISTERED!r} (the env's registered reward_threshold), got {value!r}")
        return float(value)

    @property
    def threshold(self) -> float | None:
        """The mean return that solves the run; None: the run has no threshold. Only a resolved section has one
        (shared/config/threshold.py, before the run starts); asking an unresolved one is a bug."""
        if isinstance(self.solve_threshold, str):
            raise RuntimeError("env.solve_threshold 'registered' was not resolved: resolve the run config with "
                               "rlfleet.shared.config.threshold.resolve_threshold before the run starts")
        return self.solve_threshold
