"""IMPALA's registry entry: actor-critic with V-trace off-policy correction, for asynchronous collectors."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import AlgorithmSpec, ChunkParams, sampled_head, sampling_behaviour
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.values import CriticValue


class ImpalaParams(ChunkParams):
    """Defaults follow the paper: rho_bar = c_bar = 1, one gradient step per batch, the plain policy gradient
    (no clip_ratio), gradients clipped at a norm of 40 (configs/cartpole_impala.yaml tunes them for CartPole;
    configs/lunarlander_impala.yaml adds the clipped surrogate, which lets several epochs per batch hold). One
    update is cheap, so learn-info reports and checkpoints come less often than the chunk loop's defaults."""

    name: Literal["impala"] = "impala"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    """The policy network's hidden layers and activation."""
    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 500
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Optimizer step size."""
    epochs: Annotated[int, Field(ge=1, le=100, description=(
        "gradient steps per batch, each after re-running V-trace with the updated networks"))] = 1
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.99
    """Discount factor."""
    rho_bar: Annotated[float, Field(gt=0, description="truncation of the importance weights in the TD errors")] = 1.0
    c_bar: Annotated[float, Field(gt=0, description="truncation of the trace coefficients (how far back)")] = 1.0
    vtrace_lambda: Annotated[float, Field(ge=0, le=1, description="scales every trace coefficient c")] = 1.0
    clip_ratio: Annotated[float | None, Field(gt=0, lt=1, description=(
        "APPO's trust region: the policy term becomes the clipped surrogate of the ratio pi/mu (current policy "
        "over the one that acted, itself the importance weight) on the V-trace advantages without their rho, "
        "clipped to [1 - clip_ratio, 1 + clip_ratio], so several epochs on one batch stay near the data; null: the "
        "paper's plain policy gradient"))] = None
    normalize_advantages: bool = False
    """Scale each step's V-trace advantages to mean 0 and std 1 over the batch's valid rows (in a learner group,
    over every rank's rows), as Sample Factory's APPO does: the policy term then has the same size whatever the
    rewards' scale, and entropy_coef keeps its meaning. false: the paper's raw advantages."""
    value_coef: Annotated[float, Field(ge=0)] = 0.5
    """Weight of the value loss."""
    entropy_coef: Annotated[float, Field(ge=0)] = 0.01
    """Weight of the entropy bonus."""
    max_grad_norm: Annotated[float, Field(gt=0)] = 40.0
    """Gradients are clipped to this global norm."""
    log_std_init: Annotated[float, Field(ge=-5, le=2, description="gaussian head: initial log-std")] = 0.0
    value: CriticValue = CriticValue()
    """The critic's value representation: Pohlen's transform, a scalar or categorical head."""


SPEC = AlgorithmSpec(name="impala", summary="IMPALA, V-trace corrected actor-critic; asynchronous, bounded lag",
                     params=ImpalaParams, loop="chunks", learner="rlfleet.learner_worker.algorithms.impala:Impala",
                     head=sampled_head, behaviour=sampling_behaviour, shares=())  # each rank: the chunks it takes
