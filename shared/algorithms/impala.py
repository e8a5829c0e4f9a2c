"""IMPALA's registry entry: actor-critic with V-trace off-policy correction, for asynchronous collectors."""

from __future__ import annotations

from typing import ClassVar, Literal

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


SPEC = AlgorithmSpec(name="impala", summary="IMPALA, V-trace corrected actor-critic; asynchronous, bounded lag",
                     params=ImpalaParams, loop="chunks", learner="rlfleet.learner_worker.algorithms.impala:Impala",
                     head=sampled_head, behaviour=sampling_behaviour, shares=())  # each rank: the chunks it takes
