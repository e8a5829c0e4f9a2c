"""A2C's registry entry: synchronous advantage actor-critic, one gradient step per batch of fresh chunks."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import AlgorithmSpec, ChunkParams, sampled_head, sampling_behaviour
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.values import CriticValue


class A2CParams(ChunkParams):
    """Defaults are Stable-Baselines3's A2C ones, which rl-zoo keeps for CartPole-v1 (with ent_coef 0):
    RMSprop, lambda = 1 (n-step returns within the chunk), no advantage normalisation. One update is cheap,
    so learn-info reports and checkpoints come less often than the chunk loop's defaults."""

    name: Literal["a2c"] = "a2c"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    """The policy network's hidden layers and activation."""
    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 500
    learning_rate: Annotated[float, Field(gt=0)] = 7e-4
    """Optimizer step size."""
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.99
    """Discount factor."""
    gae_lambda: Annotated[float, Field(ge=0, le=1, description="1: n-step returns to the chunk's end")] = 1.0
    value_coef: Annotated[float, Field(ge=0)] = 0.5
    """Weight of the value loss."""
    entropy_coef: Annotated[float, Field(ge=0)] = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: Annotated[float, Field(gt=0)] = 0.5
    """Gradients are clipped to this global norm."""
    rmsprop_alpha: Annotated[float, Field(gt=0, lt=1, description="RMSprop's smoothing constant")] = 0.99
    rmsprop_eps: Annotated[float, Field(gt=0)] = 1e-5
    """RMSprop's epsilon."""
    log_std_init: Annotated[float, Field(ge=-5, le=2, description="gaussian head: initial log-std")] = 0.0
    value: CriticValue = CriticValue()
    """The critic's value representation: Pohlen's transform, a scalar or categorical head."""


SPEC = AlgorithmSpec(name="a2c", summary="A2C, n-step/GAE advantages, one RMSprop step per batch; synchronous",
                     params=A2CParams, loop="chunks", learner="rlfleet.learner_worker.algorithms.a2c:A2C", head=sampled_head,
                     behaviour=sampling_behaviour, shares=())  # each rank trains on the chunks it takes
