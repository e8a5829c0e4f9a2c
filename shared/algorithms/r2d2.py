"""r2d2's registry entry (Kapturowski et al., 2019, "Recurrent Experience Replay in Distributed Reinforcement
Learning"): recurrent double Q-learning over replayed sequences with a burn-in, n-step targets through Pohlen's h, a
target network and prioritized sequences; epsilon-greedy collectors that carry one core state per env."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import REPLAY_LIVE, AlgorithmSpec, SequenceParams
from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.config.values import ValueTransform
from rlfleet.shared.payloads.spaces import DiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, Head

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig


class R2D2Params(SequenceParams):
    """Defaults follow the paper where it is not about Atari's scale (n = 5, eta = 0.9, h with eps 1e-3, gradients
    clipped to 40, an LSTM core) and are sized for small control tasks otherwise (a 64-unit core, learning rate 1e-3,
    target sync every 200 updates instead of 2,500)."""

    name: Literal["r2d2"] = "r2d2"
    """Algorithm name."""
    net: NetConfig = NetConfig(hidden=(64,), activation="relu", core=CoreConfig(kind="lstm", hidden=64))
    """The Q-network: encoder, recurrent core (required), hidden layers after it and activation."""
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Optimizer step size."""
    n_step: Annotated[int, Field(ge=1, le=32)] = 5
    """N-step return length (never reaches past an episode end or the chunk's last row)."""
    target_update_every: Annotated[int, Field(ge=1, description="updates between target-net syncs")] = 200
    max_grad_norm: Annotated[float, Field(gt=0)] = 40.0
    """Gradients are clipped to this global norm."""
    priority_eta: Annotated[float, Field(ge=0, le=1)] = 0.9
    """A sequence's priority is eta * max + (1 - eta) * mean of the |TD| (in h-space) over its trained rows."""
    value: ValueTransform = ValueTransform(transform="pohlen")
    """Q-values trained on Pohlen's h of the n-step targets (the paper's), or on raw returns."""


def _head(spaces: Spaces) -> Head:
    if not isinstance(spaces.action, DiscreteActions):
        raise ValueError(f"r2d2 needs a Discrete action space, the env has {spaces.action.kind}")
    return "q_values"


def _behaviour(config: RunConfig, spaces: Spaces) -> Behaviour:
    return Behaviour(head=_head(spaces), sample=False, epsilon=config.collector.epsilon, core=config.algo.net.core)


SPEC = AlgorithmSpec(name="r2d2", summary="R2D2: recurrent double Q over replayed sequences with burn-in, n-step "
                     "targets through h, prioritized sequences", params=R2D2Params, loop="sequences",
                     learner="rlfleet.learner_worker.algorithms.r2d2:R2D2", head=_head, behaviour=_behaviour,
                     live=(*REPLAY_LIVE, "collector.epsilon.end", "collector.epsilon.decay_env_steps"),
                     shares=("batch_size",), recurrent=True)
