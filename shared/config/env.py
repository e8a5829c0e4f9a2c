"""The run config's env section: which environment, with which arguments, time limit and wrappers.

Validating it checks values only. The section is built once before the run starts (`preflight`,
shared/config/preflight.py), so a typo in an id, an entry point that does not import, kwargs the constructor
rejects or a wrapper that does not fit is refused before any service starts, naming the field, instead of
crashing every collector later.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, JsonValue

from shared.config.base import Strict
from shared.envs.wrappers import WrapperConfig

DEFAULT_ENV_ID = "CartPole-v1"


class EnvConfig(Strict):
    id: str = Field(DEFAULT_ENV_ID, description="a registered gymnasium id, or the entry point of your own env: "
                                                "'package.module:ClassOrFactory' (anything with a ':')")
    kwargs: dict[str, JsonValue] = Field(default_factory=dict, description="keyword arguments for the env's "
                                                                           "constructor or factory (JSON values)")
    max_episode_steps: Annotated[int | None, Field(ge=1, description="truncate episodes after this many steps "
                                                                     "(gymnasium's TimeLimit)")] = None
    wrappers: tuple[WrapperConfig, ...] = Field((), description="applied in order on top of the env: "
                                                                "clip_actions, frame_stack, scale_reward, "
                                                                "normalize_obs")
    solve_threshold: float = Field(475.0, description=(
        "mean evaluation return that marks the run solved (the env's own return: scale_reward does not apply); "
        "not used by a two-player game with a battle rule (evaluation.against)"))
