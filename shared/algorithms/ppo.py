"""PPO's registry entry: clipped surrogate on fresh chunks; categorical, multi-categorical or gaussian actions."""

from __future__ import annotations

from typing import ClassVar, Literal

from rlfleet.shared.algorithms.base import (
    AlgorithmSpec,
    ClippedSurrogateParams,
    sampled_head,
    sampling_behaviour,
    sde_fits,
)
from rlfleet.shared.config.base import NetConfig


class PPOParams(ClippedSurrogateParams):
    """Defaults are rl-zoo's CartPole-v1 hyperparameters (separate 64x64 tanh actor and critic)."""

    name: Literal["ppo"] = "ppo"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    """The policy network's hidden layers and activation."""


SPEC = AlgorithmSpec(name="ppo", summary="PPO, clipped surrogate, GAE; synchronous or bounded-lag",
                     params=PPOParams, loop="chunks", learner="rlfleet.learner_worker.algorithms.ppo:PPO",
                     head=sampled_head, behaviour=sampling_behaviour, fits=sde_fits, shares=("minibatch_size",))
