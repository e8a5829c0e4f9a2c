"""recurrent_impala's registry entry: the V-trace actor-critic of Espeholt et al. 2018 with a recurrent core, as the
paper trains its LSTM agents: V-trace over each env's sequence in a chunk, unrolled from the core state the
collector stored for the sequence's first row, for asynchronous collectors."""

from __future__ import annotations

from typing import ClassVar, Literal

from rlfleet.shared.algorithms.base import AlgorithmSpec, VtraceParams, sampled_head, sampling_behaviour
from rlfleet.shared.config.base import CoreConfig, NetConfig


class RecurrentImpalaParams(VtraceParams):
    """The V-trace knobs (defaults: the paper's) with a core: by default one LSTM layer of 128 units before 64x64
    tanh layers, the shape of the memoryless learner's network with the paper's LSTM between encoder and MLP."""

    name: Literal["recurrent_impala"] = "recurrent_impala"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh", core=CoreConfig(kind="lstm", hidden=128))
    """The policy network: encoder, recurrent core (required), hidden layers and activation."""


SPEC = AlgorithmSpec(name="recurrent_impala", summary="V-trace actor-critic with a recurrent core: truncated BPTT "
                     "over each env's sequence in a chunk from its stored core state; asynchronous, bounded lag",
                     params=RecurrentImpalaParams, loop="chunks",
                     learner="rlfleet.learner_worker.algorithms.recurrent_impala:RecurrentImpala",
                     head=sampled_head, behaviour=sampling_behaviour, recurrent=True,
                     shares=())  # each rank: the chunks it takes; one step per epoch over all of them
