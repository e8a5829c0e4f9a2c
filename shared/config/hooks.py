"""Learner hooks: the user's own functions, named in the run config as 'package.module:function', that the
learner calls at points of training (DI-engine's BaseLearner hooks, as entry points in a config).

The config model, the view a hook receives and the loading of a hook's function live here, torch-free: the
coordinator validates configs with this module, and a hook's author can import HookView for type hints
without loading the learner. Calling the hooks, and switching off one that raises, is learner_worker/hooks.py.

A hook receives one HookView and nothing else: numbers copied out of the learner, never the model, its
optimiser or the worker session. A hook that could reach those could change weights in the middle of an update,
publish, or give up the lease, and a bug in a logging function would then corrupt the run instead of merely
being switched off. The view keeps honest mistakes away from training; it is no sandbox: a hook runs in the
learner's process.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from rlfleet.shared.config.base import Strict
from rlfleet.shared.config.hints import did_you_mean

HookEvent = Literal["start", "every", "publish", "end"]
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
CALL_PATTERN = rf"^{_NAME}(\.{_NAME})*:{_NAME}$"
MAX_HOOKS = 32
# What the learner reports and status shows: HookConfig.name -> where and what the hook raised.
HooksFailed = Annotated[
    dict[Annotated[str, Field(pattern=rf"^{_NAME}(\.{_NAME})*:{_NAME}@({'|'.join(get_args(HookEvent))})$",
                              max_length=220)], Annotated[str, Field(max_length=1000)]],
    Field(max_length=MAX_HOOKS, description="learner hooks switched off after they raised: name "
                                            "('module:function@event') -> where and what it raised"),
]


class HookConfig(Strict):
    at: HookEvent = Field(description=(
        "start: after resume, before the first update; every: each `every` updates; publish: after each policy "
        "publish; end: when training stops, unless the learner itself crashed"))
    call: str = Field(pattern=CALL_PATTERN, max_length=200, description=(
        "the function, 'package.module:function', called with one HookView (shared/config/hooks.py)"))
    every: int | None = Field(None, ge=1, description="at=every only: updates between two calls")

    @model_validator(mode="after")
    def _period(self) -> HookConfig:
        if self.at == "every" and self.every is None:
            raise ValueError("at=every needs `every`: the number of updates between two calls")
        if self.at != "every" and self.every is not None:
            raise ValueError(f"`every` applies to at=every only; remove it from this at={self.at} hook")
        return self

    @property
    def name(self) -> str:
        """How logs and status name this hook: 'package.module:function@event', unique within a config."""
        return f"{self.call}@{self.at}"


@dataclass(frozen=True)
class ScoreView:
    """A validation or held-out test as a hook sees it."""

    policy_version: int
    mean: float  # mean return over its episodes
    env_steps: int  # the run's env steps when it was reported


@dataclass(frozen=True)
class HookView:
    """What a hook sees of the learner at one event: a frozen snapshot of numbers and a copy of the losses."""

    event: HookEvent
    run_name: str
    algorithm: str
    iteration: int  # updates trained, the one that fired this hook included
    transitions_trained: int
    policy_version: int  # the latest version this learner published or resumed from
    losses: Mapping[str, float]  # the last update's; empty at start (no update since this resume yet)
    error: str | None = None  # end only: what stopped training (divergence, the coordinator lost), if not the run
    # What the learner last heard of the run from the coordinator (with each reply it gets): the run's acknowledged
    # env steps (the x-axis of the run's curves), the mean training return of its last 100 episodes (null before
    # one ends), and the latest validation and held-out test (null before the first of each).
    env_steps: int = 0
    recent_return_mean: float | None = None
    latest_validation: ScoreView | None = None
    latest_test: ScoreView | None = None

    def __post_init__(self) -> None:
        # Each view holds its own copy (the learner builds one per hook), so a hook changing it changes nothing
        # else; a plain dict, so dataclasses.asdict and json take the view as it is.
        object.__setattr__(self, "losses", dict(self.losses))


Hook = Callable[[HookView], object]


class HookLoadError(ValueError):
    """A hook whose function cannot be loaded: a config error, never a hook failure. The message names the
    field (learner.hooks[i].call) and what would work."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"learner.hooks[{index}].call: {problem}")


def load_hook(index: int, call: str) -> Hook:
    """The function `call` names ('package.module:function'), importing its module; HookLoadError if there is
    none, or it cannot take the one HookView argument."""
    module_name, _, attr = call.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # whatever the user's module raised while importing
        raise HookLoadError(index, f"cannot import module {module_name!r} ({type(exc).__name__}: {exc}): install "
                                   f"it, or put it on PYTHONPATH, for the coordinator and the learner") from exc
    hook = getattr(module, attr, None)
    if not callable(hook):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise HookLoadError(index, f"module {module_name!r} has no function {attr!r}{did_you_mean(attr, names)}; "
                                   f"write it as 'package.module:function'")
    try:
        signature = inspect.signature(hook)
    except ValueError:  # no signature to read (some builtins): calling it will tell
        return hook
    try:
        signature.bind(None)
    except TypeError:
        raise HookLoadError(index, f"{call} takes {signature}, but a hook is called with one argument, a "
                                   f"rlfleet.shared.config.hooks.HookView") from None
    return hook
