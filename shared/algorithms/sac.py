"""SAC's registry entry: soft actor-critic on a replay buffer, for Box action spaces only.

Collectors act uniformly at random until the run has `learning_starts` env steps, then draw from the
published tanh-gaussian policy (explore=True samples it; no log-probs are recorded, since SAC's targets need
none of the behaviour's). The gradient steps per env step of SB3's train_freq/gradient_steps are
`replay.samples_per_insert / batch_size` here: the rate limiter keeps that ratio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import REPLAY_LIVE, AlgorithmSpec, ReplayParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import BoxActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, Head

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig


class SACParams(ReplayParams):
    """Defaults are SB3's SAC defaults: 256x256 relu actor and twin critics, batch 256, tau 0.005, lr 3e-4."""

    name: Literal["sac"] = "sac"
    """Algorithm name."""
    net: NetConfig = NetConfig(hidden=(256, 256), activation="relu")
    """The policy network's hidden layers and activation."""
    learning_rate: Annotated[float, Field(gt=0, description="Adam's, for actor, critics and the entropy coef")] = 3e-4
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 256
    """Transitions per gradient step."""
    tau: Annotated[float, Field(gt=0, le=1, description="Polyak factor of the target critics")] = 0.005
    target_update_interval: Annotated[int, Field(ge=1, description="updates between Polyak steps")] = 1
    learning_starts: Annotated[int, Field(ge=0, description="env steps of uniform random actions first")] = 100
    target_entropy: Annotated[float | Literal["auto"], Field(
        description="entropy the coefficient is tuned towards; auto = -(action dimensions)")] = "auto"
    ent_coef_init: Annotated[float, Field(gt=0, description="initial entropy coefficient (alpha)")] = 1.0


def _head(spaces: Spaces) -> Head:
    if not isinstance(spaces.action, BoxActions):
        raise ValueError(f"sac needs a Box action space, the env has {spaces.action.kind}")
    return "tanh_gaussian"


def _behaviour(config: RunConfig, spaces: Spaces) -> Behaviour:
    params = config.algo
    assert isinstance(params, SACParams)
    return Behaviour(head=_head(spaces), sample=False, random_env_steps=params.learning_starts)


SPEC = AlgorithmSpec(name="sac", summary="soft actor-critic, twin critics, automatic entropy tuning",
                     params=SACParams, loop="replay", learner="rlfleet.learner_worker.algorithms.sac:SAC", head=_head,
                     behaviour=_behaviour, live=REPLAY_LIVE, shares=("batch_size",))
