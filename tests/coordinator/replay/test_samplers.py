"""The samplers on their own (no storage, no buffer) and the samplers' registry.

Each sampler is fed item slots the way the buffer feeds it (`insert` over written rows with item starts,
`remove` of items that left) and must draw only live items, in its distribution or order.
"""

from __future__ import annotations

from typing import Any, get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.coordinator.replay.samplers import BUILDERS, Priorities, ProportionalSampler, QueueSampler, Sampler, build_sampler
from rlfleet.shared.config.run_config import ReplayConfig
from rlfleet.shared.config.samplers import SAMPLERS, SamplerKind, samplers_where
from tests.support.chisquare import chi2_critical, chi2_statistic


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def prioritized(capacity: int, alpha: float, epsilon: float) -> ProportionalSampler:
    return ProportionalSampler(capacity, Priorities(alpha, epsilon))


def fill(sampler: Sampler, capacity: int, starts: list[int], leaf: float = 1.0) -> None:
    """Items at `starts` over a ring of `capacity` rows written in one go."""
    sampler.insert(np.arange(capacity), np.asarray(starts, np.int64), leaf)


# ----- the registry -----------------------------------------------------------------------------------------


def test_every_sampler_name_has_traits_and_a_builder_and_nothing_else_does() -> None:
    assert set(get_args(SamplerKind)) == set(SAMPLERS) == set(BUILDERS)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_each_built_sampler_behaves_as_its_traits_say(name: SamplerKind) -> None:
    traits = SAMPLERS[name]
    sampler = build_sampler(ReplayConfig(sampler=name, capacity_transitions=8, alpha=1.0))
    assert sampler.repeats is not traits.queue  # a queue hands each item out once per draw
    takes = isinstance(sampler, ProportionalSampler) and sampler.priorities is not None
    assert takes is traits.priorities
    fill(sampler, 8, [0, 1, 2, 3])
    if isinstance(sampler, ProportionalSampler) and sampler.priorities is not None:
        sampler.update(np.array([0]), np.array([9.0]))
    weights = sampler.weights(sampler.draw(rng(), 64), 1.0)
    assert bool(np.any(weights != 1)) is traits.weighted
    assert ReplayConfig(sampler=name).traits is traits


def test_samplers_where_answers_in_table_order_and_refuses_an_unknown_trait() -> None:
    assert samplers_where(queue=False) == ["uniform", "prioritized"]
    assert samplers_where(queue=True) == ["fifo", "lifo"]
    assert samplers_where(priorities=True, weighted=True) == ["prioritized"]
    with pytest.raises(TypeError, match="queue"):
        samplers_where(fast=True)


# ----- the sum-tree sampler: uniform, and prioritized with Priorities ---------------------------------------


def test_uniform_draws_live_items_with_equal_frequency() -> None:
    sampler = ProportionalSampler(12)
    fill(sampler, 12, [0, 2, 3, 5, 8, 11])
    sampler.remove(np.array([3]))
    drawn = sampler.draw(rng(1), 50_000)
    slots, counts = np.unique(drawn, return_counts=True)
    assert slots.tolist() == [0, 2, 5, 8, 11]
    assert chi2_statistic(counts, np.full(5, 10_000.0)) < chi2_critical(4)
    assert np.all(sampler.weights(drawn, 1.0) == 1.0)


def test_prioritized_draws_in_proportion_to_priority_to_the_alpha() -> None:
    sampler = prioritized(6, 0.5, 1e-6)
    fill(sampler, 6, [0, 1, 2, 3])
    priorities = np.array([1.0, 4.0, 9.0, 16.0])
    sampler.update(np.arange(4), priorities)
    leaf = (priorities + 1e-6) ** 0.5
    drawn = sampler.draw(rng(2), 40_000)
    counts = np.bincount(drawn, minlength=6)
    assert counts[4:].sum() == 0
    assert chi2_statistic(counts[:4], 40_000 * leaf / leaf.sum()) < chi2_critical(3)
    # w_i = (leaf_i / min leaf)**-beta: the rarest item weighs 1, the others less
    np.testing.assert_allclose(sampler.weights(np.arange(4), 0.4), (leaf / leaf.min()) ** -0.4, rtol=1e-12)


def test_prioritized_new_items_enter_at_the_largest_priority_seen_which_never_falls() -> None:
    sampler = prioritized(8, 0.5, 1e-9)
    assert sampler.new_leaf == 1.0
    fill(sampler, 8, [0, 1])
    sampler.update(np.array([0]), np.array([16.0]))
    sampler.update(np.array([1]), np.array([0.25]))
    assert sampler.max_priority == pytest.approx(16.0) and sampler.new_leaf == pytest.approx(4.0)
    restored = prioritized(8, 0.5, 1e-9)
    restored.load_state_dict(sampler.state_dict())
    assert restored.max_priority == sampler.max_priority


def test_priorities_turn_into_leaves_and_only_raise_the_largest_seen() -> None:
    priorities = Priorities(alpha=0.5, epsilon=0.25)
    np.testing.assert_allclose(priorities.leaves(np.array([0.0, 3.75])), [0.5, 2.0])
    assert priorities.max_priority == 4.0 and priorities.new_leaf == 2.0
    priorities.leaves(np.array([1.0]))
    assert priorities.state_dict() == {"max_priority": 4.0}


def test_a_uniform_sampler_refuses_priorities_and_reports_a_max_priority_of_one() -> None:
    sampler = ProportionalSampler(4)
    fill(sampler, 4, [0, 1])
    with pytest.raises(ValueError, match="replay.sampler=prioritized"):
        sampler.update(np.array([0]), np.array([5.0]))
    assert (sampler.max_priority, sampler.new_leaf, sampler.state_dict()) == (1.0, 1.0, {})


@pytest.mark.parametrize("make", [lambda: ProportionalSampler(16), lambda: prioritized(16, 0.6, 1e-6)])
def test_a_deferred_remove_then_an_insert_over_the_same_rows_leaves_the_tree_exact(make: Any) -> None:
    """The ring overwriting rows: items removed with refresh=False, then the write's insert covers those rows."""
    deferred, direct = make(), make()
    for sampler in (deferred, direct):
        fill(sampler, 16, list(range(0, 16, 2)))
    deferred.remove(np.array([4, 6]), refresh=False)
    direct.remove(np.array([4, 6]))
    for sampler in (deferred, direct):
        sampler.insert(np.arange(4, 8), np.array([1, 3]), 2.0)  # rows 4..7, items now at 5 and 7
    assert np.array_equal(deferred.leaves(np.arange(16)), direct.leaves(np.arange(16)))
    assert deferred.tree.total == direct.tree.total == 6 * 1.0 + 2 * 2.0
    assert set(np.unique(deferred.draw(rng(3), 2000)).tolist()) == {0, 2, 5, 7, 8, 10, 12, 14}


@settings(max_examples=80, deadline=None)
@given(capacity=st.integers(1, 40), data=st.data())
def test_tree_samplers_draw_only_items_inserted_and_not_removed(capacity: int, data: st.DataObject) -> None:
    starts = data.draw(st.lists(st.integers(0, capacity - 1), unique=True, min_size=1))
    removed = data.draw(st.lists(st.sampled_from(starts), unique=True, max_size=len(starts) - 1))
    for sampler in (ProportionalSampler(capacity), prioritized(capacity, 0.6, 1e-6)):
        fill(sampler, capacity, sorted(starts))
        sampler.remove(np.asarray(removed, np.int64))
        assert sampler.available()
        drawn = sampler.draw(rng(data.draw(st.integers(0, 2**16))), 200)
        assert set(drawn.tolist()) <= set(starts) - set(removed)
        sampler.remove(np.asarray(sorted(set(starts) - set(removed)), np.int64))
        assert not sampler.available()


def test_leaves_round_trip_through_a_snapshot() -> None:
    source, target = prioritized(8, 1.0, 1e-6), prioritized(8, 1.0, 1e-6)
    fill(source, 8, [1, 4, 6])
    fill(target, 8, [1, 4, 6])
    source.update(np.array([4, 6]), np.array([3.0, 0.5]))
    target.set_leaves(np.array([1, 4, 6]), source.leaves(np.array([1, 4, 6])))
    assert np.array_equal(target.leaves(np.arange(8)), source.leaves(np.arange(8)))


# ----- queues: fifo and lifo ----------------------------------------------------------------------------------


@pytest.mark.parametrize("newest_first", [False, True])
def test_a_queue_hands_out_items_in_arrival_order_from_its_end_once_per_draw(newest_first: bool) -> None:
    sampler = QueueSampler(newest_first)
    sampler.insert(np.array([6, 7, 0, 1]), np.array([0, 2]), 1.0)   # items at 6 then 0 (the ring wrapped)
    sampler.insert(np.array([2, 3]), np.array([0, 1]), 1.0)          # then 2 and 3
    arrival = [6, 0, 2, 3]
    order = arrival[::-1] if newest_first else arrival
    assert sampler.draw(rng(), 3).tolist() == order[:3]
    assert sampler.draw(rng(), 10).tolist() == order                  # never more than it holds, none twice
    sampler.remove(np.array([0, 5]))                                  # from the middle; 5 was never there
    assert sampler.draw(rng(), 10).tolist() == [s for s in order if s != 0]
    assert np.all(sampler.weights(np.array(order), 1.0) == 1) and np.all(sampler.leaves(np.array(order)) == 1)
    sampler.remove(np.array([6, 2, 3]))
    assert not sampler.available() and sampler.draw(rng(), 4).tolist() == []


def test_a_queue_draw_does_not_depend_on_the_generator() -> None:
    sampler = QueueSampler(newest_first=False)
    fill(sampler, 5, [0, 2, 4])
    assert sampler.draw(rng(1), 2).tolist() == sampler.draw(rng(2), 2).tolist() == [0, 2]
