"""The supervised trainer's registry entry (ALF's SLTrainer idea): a model fitted to (input, target) columns of
a recorded dataset, for a value, reward or dynamics model trained on collected experience.

The input is the named chunk columns side by side (observations flattened, discrete actions one-hot); the
target is one column, regressed (`mse`) or classified (`cross_entropy`: discrete actions, or `terminated`).
Nothing is published as a policy: after every epoch the model is saved as safetensors with its description
(`models/epoch-NNNNNN.safetensors` in the run's store, the lowest valid loss as `best/model.safetensors`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from rlfleet.shared.algorithms.base import AlgorithmSpec, DatasetParams, sampled_head
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour

Column = Literal["obs", "actions", "rewards", "next_obs", "terminated"]
CLASS_TARGETS = ("actions", "terminated")  # columns whose values are classes (actions: when discrete)


class SupervisedParams(DatasetParams):
    """Defaults fit a reward model r(s, a) of a recorded CartPole dataset."""

    name: Literal["supervised"] = "supervised"
    """Algorithm name."""
    net: NetConfig = NetConfig(hidden=(64, 64), activation="relu")
    """The model's hidden layers and activation."""
    inputs: Annotated[tuple[Column, ...], Field(min_length=1, description=(
        "chunk columns fed to the model, side by side (discrete actions one-hot)"))] = ("obs", "actions")
    target: Column = Field("rewards", description="the chunk column the model predicts")
    loss: Literal["mse", "cross_entropy"] = Field("mse", description=(
        "mse: regression of the target's values; cross_entropy: classification of a class-valued target"))
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Adam's step size."""
    weight_decay: Annotated[float, Field(ge=0, description="AdamW's decoupled weight decay")] = 0.0

    @model_validator(mode="after")
    def _columns(self) -> SupervisedParams:
        if self.target in self.inputs:
            raise ValueError(f"algo.target {self.target!r} is also in algo.inputs: the model would copy it")
        if len(set(self.inputs)) < len(self.inputs):
            raise ValueError(f"algo.inputs {list(self.inputs)} names a column twice")
        if self.loss == "cross_entropy" and self.target not in CLASS_TARGETS:
            raise ValueError(f"algo.loss cross_entropy classifies: algo.target must be one of {list(CLASS_TARGETS)}, "
                             f"not {self.target!r} (use mse to regress it)")
        return self


def _fits(config: object, spaces: Spaces) -> None:
    """Classes need discrete actions."""
    from rlfleet.shared.config.run_config import RunConfig

    assert isinstance(config, RunConfig) and isinstance(config.algo, SupervisedParams)
    if config.algo.loss != "cross_entropy" or config.algo.target != "actions":
        return
    kind = spaces.action.kind
    if kind != "discrete":
        raise ValueError(f"algo.target actions with algo.loss cross_entropy needs discrete actions; "
                         f"{config.env.id} has {kind} actions: use mse")


def _behaviour(config: object, spaces: Spaces) -> Behaviour:
    """Nobody acts in a supervised run; the entry is what every algorithm declares."""
    return Behaviour(head=sampled_head(spaces), sample=False)


SPEC = AlgorithmSpec(name="supervised", summary="supervised learning of a dataset column from others (SLTrainer)",
                     params=SupervisedParams, loop="dataset", learner="rlfleet.learner_worker.algorithms.supervised:Supervised",
                     head=sampled_head, behaviour=_behaviour, fits=_fits)
