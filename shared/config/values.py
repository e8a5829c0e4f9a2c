"""How value-learning algorithms represent values: the options shared by Q-networks and critics.

Pohlen et al. 2018's transform h(x) = sign(x)(sqrt(|x|+1)-1) + eps*x squashes large returns, so one set of
hyperparameters learns rewards of 1 and of 100 alike: targets are computed in raw units and trained in h-space,
bootstrapped values are read back through h^-1. A critic may also be a categorical head over a support of
h-values (MuZero's value head): trained with cross-entropy against the two-hot projection of its target.

The math (torch) lives in learner_worker/value_transform.py; this module holds the config and the checks a
config can be refused on, so the coordinator validates it without torch.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from rlfleet.shared.config.base import Strict


def pohlen(x: float, eps: float) -> float:
    """h(x), for config checks (the learner's torch version is the one that trains)."""
    return math.copysign(math.sqrt(abs(x) + 1) - 1, x) + eps * x


class ValueTransform(Strict):
    """What the value targets are trained on: raw returns, or Pohlen's h of them."""

    transform: Literal["none", "pohlen"] = Field("none", description=(
        "pohlen: train on h(target) = sign(x)(sqrt(|x|+1)-1) + eps*x and bootstrap through h^-1"))
    eps: Annotated[float, Field(gt=0, le=1, description="the transform's linear term")] = 1e-3


class Support(Strict):
    """The categorical value head's atoms: `bins` evenly spaced values from `min` to `max` (in h-space when the
    transform is on)."""

    min: float = Field(-20.0, description="the lowest atom")
    max: float = Field(20.0, description="the highest atom")
    bins: Annotated[int, Field(ge=2, le=1001, description="number of atoms")] = 51

    @model_validator(mode="after")
    def _ordered(self) -> Support:
        if not self.min < self.max:
            raise ValueError(f"support.min ({self.min}) must be below support.max ({self.max})")
        return self


class CriticValue(ValueTransform):
    """A critic's value representation: a transform, and a scalar or categorical head."""

    head: Literal["scalar", "categorical"] = Field("scalar", description=(
        "scalar: one output, squared error; categorical: a distribution over `support`, cross-entropy against the "
        "two-hot projection of the (transformed) target"))
    support: Support = Field(Support(), description="the categorical head's atoms (h-values with the transform)")
    max_abs_return: Annotated[float | None, Field(gt=0, description=(
        "categorical head: the largest |return| (training reward units, e.g. with scale_reward) the critic must "
        "represent; the support has to cover it after the transform"))] = None

    @model_validator(mode="after")
    def _covered(self) -> CriticValue:
        if self.head != "categorical":
            return self
        if self.max_abs_return is None:
            raise ValueError("value.head=categorical needs value.max_abs_return, the largest |return| to represent "
                             "(its support is checked against it)")
        reach = pohlen(self.max_abs_return, self.eps) if self.transform == "pohlen" else self.max_abs_return
        if self.support.min > -reach or self.support.max < reach:
            what = f"h({self.max_abs_return:g}) = {reach:.4g}" if self.transform == "pohlen" else f"{reach:g}"
            raise ValueError(f"value.support [{self.support.min:g}, {self.support.max:g}] does not cover returns "
                             f"of +/-{self.max_abs_return:g} ({what}): widen it to at least [-{reach:.4g}, "
                             f"{reach:.4g}]")
        return self
