"""The samplers' registry: a sampler's name (`replay.sampler`) maps to the class that draws for it.

The facts other code asks about a sampler (is it a queue, does it take priorities, are its draws weighted) are
shared/config/samplers.py's table, which this registry builds on: one entry per name there, one builder per name here,
and `test_samplers.py` checks the two agree with each other and with each class.
"""

from __future__ import annotations

from collections.abc import Callable

from rlfleet.coordinator.replay.samplers.base import Sampler
from rlfleet.coordinator.replay.samplers.priorities import Priorities
from rlfleet.coordinator.replay.samplers.proportional import ProportionalSampler
from rlfleet.coordinator.replay.samplers.queue import QueueSampler
from rlfleet.shared.config.run_config import ReplayConfig
from rlfleet.shared.config.samplers import SamplerKind

__all__ = ["BUILDERS", "Priorities", "ProportionalSampler", "QueueSampler", "Sampler", "build_sampler"]

BUILDERS: dict[SamplerKind, Callable[[ReplayConfig], Sampler]] = {
    "uniform": lambda replay: ProportionalSampler(replay.capacity_transitions),
    "prioritized": lambda replay: ProportionalSampler(replay.capacity_transitions,
                                                      Priorities(replay.alpha, replay.priority_epsilon)),
    "fifo": lambda replay: QueueSampler(newest_first=False),
    "lifo": lambda replay: QueueSampler(newest_first=True),
}


def build_sampler(replay: ReplayConfig) -> Sampler:
    """The configured sampler over a ring of `replay.capacity_transitions` slots."""
    return BUILDERS[replay.sampler](replay)
