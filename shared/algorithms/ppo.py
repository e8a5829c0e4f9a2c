"""PPO's registry entry: clipped surrogate on fresh chunks; categorical, multi-categorical or gaussian actions."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import AlgorithmSpec, ChunkParams, sampled_head, sampling_behaviour
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.values import CriticValue


class PPOParams(ChunkParams):
    """Defaults are rl-zoo's CartPole-v1 hyperparameters (separate 64x64 tanh actor and critic)."""

    name: Literal["ppo"] = "ppo"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    """The policy network's hidden layers and activation."""
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Optimizer step size."""
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.98
    """Discount factor."""
    gae_lambda: Annotated[float, Field(ge=0, le=1)] = 0.8
    """GAE lambda."""
    clip_range: Annotated[float, Field(gt=0)] = 0.2
    """PPO's ratio clip."""
    epochs: Annotated[int, Field(ge=1, le=1000, description="passes over each batch")] = 20
    minibatch_size: Annotated[int, Field(ge=1, le=2**20)] = 256
    """Transitions per minibatch."""
    value_coef: Annotated[float, Field(ge=0)] = 0.5
    """Weight of the value loss."""
    entropy_coef: Annotated[float, Field(ge=0)] = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: Annotated[float, Field(gt=0)] = 0.5
    """Gradients are clipped to this global norm."""
    normalize_advantages: bool = True
    """Normalise advantages per minibatch."""
    log_std_init: Annotated[float, Field(ge=-5, le=2, description="gaussian head: initial log-std")] = 0.0
    value: CriticValue = CriticValue()
    """The critic's value representation: Pohlen's transform, a scalar or categorical head."""


SPEC = AlgorithmSpec(name="ppo", summary="PPO, clipped surrogate, GAE; synchronous or bounded-lag",
                     params=PPOParams, loop="chunks", learner="rlfleet.learner_worker.algorithms.ppo:PPO", head=sampled_head,
                     behaviour=sampling_behaviour, shares=("minibatch_size",))
