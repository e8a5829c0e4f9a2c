"""The algorithm registry: every module in this package that defines `SPEC` is an algorithm.

Adding an algorithm is one module here (its hyperparameters and `SPEC`), its learner module, a config and
tests; nothing else in rlfleet names it. The run config's `algo` section is the discriminated union of all
registered parameter models, so the OpenAPI document lists every algorithm's fields.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from rlfleet.shared.algorithms.base import AlgoParams, AlgorithmSpec

DEFAULT = "dqn"


def _discover() -> dict[str, AlgorithmSpec]:
    specs: dict[str, AlgorithmSpec] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        spec = getattr(importlib.import_module(f"{__name__}.{module}"), "SPEC", None)
        if isinstance(spec, AlgorithmSpec):
            if spec.name in specs:
                raise RuntimeError(f"two algorithms are registered as {spec.name!r}")
            specs[spec.name] = spec
    return specs


REGISTRY: dict[str, AlgorithmSpec] = _discover()

if TYPE_CHECKING:
    AlgoConfig = AlgoParams
else:
    AlgoConfig = Annotated[Union[tuple(spec.params for spec in REGISTRY.values())],  # noqa: UP007
                           Field(discriminator="name")]


def spec_of(params: AlgoParams) -> AlgorithmSpec:
    return REGISTRY[params.name]


def default_params() -> AlgoParams:
    return REGISTRY[DEFAULT].params(name=DEFAULT)
