"""Behavioural cloning's registry entry: a policy trained to imitate a recorded dataset's actions.

The learner minimises the negative log-likelihood of the recorded actions under the policy's head (a
categorical for discrete actions, a gaussian for Box), over epochs of the train split that the coordinator
serves, and reports loss (and, for discrete actions, accuracy) on the valid split after every epoch. The policy
it publishes is judged like any other: validated and held-out-tested by the evaluator in the env.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import AlgorithmSpec, DatasetParams, sampled_head
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


class BCParams(DatasetParams):
    """Defaults fit a 20-episode CartPole recording (about 10,000 transitions) in a few epochs."""

    name: Literal["bc"] = "bc"
    """Algorithm name."""
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    """The policy network's hidden layers and activation."""
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Adam's step size."""
    weight_decay: Annotated[float, Field(ge=0, description="AdamW's decoupled weight decay")] = 0.0


def _behaviour(config: object, spaces: Spaces) -> Behaviour:
    """Nobody collects in a BC run; the head is what the evaluator acts with (greedily)."""
    return Behaviour(head=sampled_head(spaces), sample=False)


SPEC = AlgorithmSpec(name="bc", summary="behavioural cloning: action log-likelihood over a recorded dataset",
                     params=BCParams, loop="dataset", learner="rlfleet.learner_worker.algorithms.bc:BC", head=sampled_head,
                     behaviour=_behaviour)
