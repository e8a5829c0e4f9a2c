"""DQN's registry entry: double Q-learning with n-step targets on a replay buffer; epsilon-greedy collectors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import REPLAY_LIVE, AlgorithmSpec, ReplayParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.values import ValueTransform
from rlfleet.shared.payloads.spaces import DiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, Head

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig


class DQNParams(ReplayParams):
    name: Literal["dqn"] = "dqn"
    """Algorithm name."""
    net: NetConfig = NetConfig()
    """The policy network's hidden layers and activation."""
    learning_rate: Annotated[float, Field(gt=0)] = 2.3e-3
    """Optimizer step size."""
    n_step: Annotated[int, Field(ge=1, le=32)] = 3
    """N-step return length (never reaches past a chunk's end)."""
    target_update_every: Annotated[int, Field(ge=1, description="updates between target-net syncs")] = 100
    max_grad_norm: Annotated[float, Field(gt=0)] = 10.0
    """Gradients are clipped to this global norm."""
    double_q: bool = True
    """Double DQN targets."""
    value: ValueTransform = ValueTransform()
    """Q-values trained on raw returns or on Pohlen's h of them (collectors' argmax is the same either way)."""


def _head(spaces: Spaces) -> Head:
    if not isinstance(spaces.action, DiscreteActions):
        raise ValueError(f"dqn needs a Discrete action space, the env has {spaces.action.kind}")
    return "q_values"


def _behaviour(config: RunConfig, spaces: Spaces) -> Behaviour:
    return Behaviour(head=_head(spaces), sample=False, epsilon=config.collector.epsilon)


SPEC = AlgorithmSpec(name="dqn", summary="double DQN, n-step targets, (prioritized) replay", params=DQNParams,
                     loop="replay", learner="rlfleet.learner_worker.algorithms.dqn:DQN", head=_head, behaviour=_behaviour,
                     live=(*REPLAY_LIVE, "collector.epsilon.end", "collector.epsilon.decay_env_steps"),
                     shares=("batch_size",))
