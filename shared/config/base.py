"""Config building blocks shared by the run config and every algorithm's hyperparameter model.

They live apart from shared/config/run_config.py because the run config is assembled from the algorithm registry, and
the registry's models are built from these: one direction of imports, no cycle.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared import FIELD_DOCS


class Strict(BaseModel):
    """Unknown keys, NaN and inf are refused; a loaded config never changes afterwards."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, use_attribute_docstrings=FIELD_DOCS)


class NetConfig(Strict):
    """The policy network every service builds: a published state dict loads into any of them."""

    hidden: tuple[int, ...] = Field((256, 256), description="hidden layer widths")
    activation: Literal["relu", "tanh"] = "relu"
    """Activation between hidden layers."""


class EpsilonSchedule(Strict):
    start: Annotated[float, Field(ge=0, le=1)] = 1.0
    """Epsilon at 0 env steps."""
    end: Annotated[float, Field(ge=0, le=1)] = 0.04
    """Epsilon after decay_env_steps."""
    decay_env_steps: Annotated[int, Field(ge=1, description="global env steps over which epsilon decays")] = 10_000

    def value(self, env_steps: int) -> float:
        """Linear decay on the run's global env-step count, so adding collectors does not slow the schedule."""
        frac = min(1.0, max(0, env_steps) / self.decay_env_steps)
        return self.start + frac * (self.end - self.start)
