"""The replay samplers a run can name, and the facts about each that the rest of rlfleet asks.

Config validation, the algorithms' buffer checks, the learner and the coordinator's data plane each need to know
something about the configured sampler (does it serve a queue of whole chunks? does it take priority updates?
are its draws importance-weighted?). They ask this table instead of comparing names, so adding a sampler is one
entry here plus its class in coordinator/replay/samplers/, whose registry is built on this table (shared/ cannot
import the coordinator, so the facts live here, beside the config that names the sampler).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

SamplerKind = Literal["uniform", "prioritized", "fifo", "lifo"]


@dataclass(frozen=True)
class SamplerTraits:
    """What callers outside the sampler need to know about it."""

    queue: bool
    """It hands out whole chunks in order, each item at most once per draw (on-policy data), instead of drawing
    i.i.d. from a replay buffer: it needs `replay.max_use` to consume them, `sampling.unit=chunk`, and it is
    paced by its backlog rather than by the samples-per-insert rate limiter."""
    priorities: bool
    """It takes priority updates from the learner; the coordinator refuses them for the others."""
    weighted: bool
    """Its draws carry importance weights (beta anneals towards 1); the others' weights are all 1."""


SAMPLERS: dict[SamplerKind, SamplerTraits] = {
    "uniform": SamplerTraits(queue=False, priorities=False, weighted=False),
    "prioritized": SamplerTraits(queue=False, priorities=True, weighted=True),
    "fifo": SamplerTraits(queue=True, priorities=False, weighted=False),
    "lifo": SamplerTraits(queue=True, priorities=False, weighted=False),
}


def samplers_where(**facts: bool) -> list[SamplerKind]:
    """The samplers with these traits, in the table's order: what an error message offers as the fix."""
    unknown = set(facts) - {f.name for f in fields(SamplerTraits)}
    if unknown:
        raise TypeError(f"sampler traits have no {sorted(unknown)}; they are {[f.name for f in fields(SamplerTraits)]}")
    return [name for name, traits in SAMPLERS.items()
            if all(getattr(traits, fact) == value for fact, value in facts.items())]
