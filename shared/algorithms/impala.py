"""IMPALA's registry entry: actor-critic with V-trace off-policy correction, for asynchronous collectors."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import AlgorithmSpec, VtraceParams, sampled_head, sampling_behaviour
from rlfleet.shared.config.base import NetConfig


class ImpalaParams(VtraceParams):
    """The paper's learner (configs/cartpole_impala.yaml tunes it for CartPole; configs/lunarlander_impala.yaml adds
    the clipped surrogate, which lets several epochs per batch hold)."""

    name: Literal["impala"] = "impala"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    """The policy network's hidden layers and activation."""
    minibatch_size: Annotated[int | None, Field(ge=2, le=2**20, description=(
        "rows per gradient step: each epoch runs V-trace once over the batch with the current networks, then takes "
        "a step on each shuffled minibatch of its valid rows (Sample Factory's APPO; pair it with clip_ratio); in "
        "a learner group, as many steps as one learner would take on every rank's rows. null: one step on the "
        "whole batch per epoch, the paper's"))] = None


SPEC = AlgorithmSpec(name="impala", summary="IMPALA, V-trace corrected actor-critic; asynchronous, bounded lag",
                     params=ImpalaParams, loop="chunks", learner="rlfleet.learner_worker.algorithms.impala:Impala",
                     head=sampled_head, behaviour=sampling_behaviour, shares=())  # each rank: the chunks it takes
