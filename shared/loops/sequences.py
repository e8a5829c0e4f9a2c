"""The sequence loop: replay batches of fixed-length sequences of one env, each with a burn-in before it, for
learners of a recurrent core (their knobs are `SequenceParams`). Collectors collect chunks; the coordinator's data
plane serves `sampling.unit: sequence` items; the learner's side is learner_worker/sequences.py.

Where a sequence's state comes from. A chunk stores each env's core state at its first row only (`core_state`),
so a sequence starting at row s of a chunk has no stored state of its own. The learner unrolls the current network,
without gradient, from the chunk's stored state through rows 0 .. s-1 of the env's column (start flags applied:
the state is zeroed where an episode began, so it starts from the last such row when there is one) and starts the
sequence from the state it reaches: the "stored state" strategy of Kapturowski et al. (2019), with the chunk's
first row as the stored point and every row before the sequence as burn-in. Why not sequences aligned to chunk
starts (one per env column, rows 0 .. burn_in-1 as burn-in): the rows a burn-in covers would never be trained on,
a burn_in / chunk_steps share of all data, and each chunk column would make one item instead of
chunk_steps - sequence_length + 1 of them. The prefix costs an unroll without gradient over at most chunk_steps
rows, cheap beside the update. `burn_in` then says how many rows of warm-up a row needs: one is trained on only
once the current weights have carried its state over at least `burn_in` rows of its chunk, or since its episode
began inside the chunk (a zero state needs no warm-up: no older network made it), or when the stored state itself
is zero (the collector stores zeros exactly where a row begins an episode). Rows with less
warm-up are unrolled through but never reach the loss or the priority.

Episode ends. Sequences are the coordinator's windows (coordinator/replay/units.py): `sequence_length` steps with
no episode end before their last step, derived from the ends collectors report without opening a payload. They
never cross an episode end, as that paper's replayed sequences never cross an episode boundary; a sequence may begin
right after one, its first row flagged as a start. The burn-in prefix does cross ends, with the start flag zeroing
the state there, so warm-up never leaks one episode's memory into the next. Windows crossing ends with the flag
would also train correctly, but they would change the coordinator's items, priorities and overwrite rules for a
gain confined to short episode fragments: a piece of an episode shorter than `sequence_length` inside a chunk
(an episode's last rows when it began in an earlier chunk and ended within sequence_length - 1 rows of this one's
start) is in no window, so keep sequence_length well below chunk_steps.

A stored state of the wrong shape (or non-finite) fails the chunk schema's check (shared/payloads/schema.py): the
learner counts the chunk as corrupt and reports it, and never trains on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlfleet.shared.loops.kind import LoopKind

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig


def _check(config: RunConfig) -> None:
    """A sequence learner replays sequences of one recurrent core's chunks, each fitting in a chunk with its
    burn-in before it. (A queue sampler is already refused for any unit but whole chunks: RunConfig._servable.)"""
    from rlfleet.shared.algorithms.base import SequenceParams  # the algorithms import this package: at call time

    algo, sampling, collector = config.algo, config.sampling, config.collector
    name = algo.name
    if not isinstance(algo, SequenceParams):
        raise TypeError(f"{name} runs on the sequence loop, so its parameters must derive from SequenceParams")
    if sampling.unit != "sequence":
        raise ValueError(f"{name} trains on sequences: set sampling.unit=sequence (got {sampling.unit})")
    if algo.net.core is None:
        raise ValueError(f"{name} trains a recurrent core from sequences: set algo.net.core, e.g. "
                         f"{{kind: lstm, hidden: 64}}")
    if sampling.n_episode is not None:
        raise ValueError(f"{name} fits each sequence and its burn-in in a chunk of collector.chunk_steps rows: leave "
                         f"sampling.n_episode unset (chunks cut after episodes have no fixed length)")
    needed = sampling.sequence_length + algo.burn_in
    if needed > collector.chunk_steps:
        raise ValueError(f"sampling.sequence_length ({sampling.sequence_length}) + algo.burn_in ({algo.burn_in}) = "
                         f"{needed} rows do not fit in a chunk of collector.chunk_steps={collector.chunk_steps} rows: "
                         f"shorten the sequence or the burn-in, or raise collector.chunk_steps")
    steps = algo.batch_size * algo.batches_per_request * sampling.sequence_length
    if not sampling.min_batch_size <= steps <= sampling.max_batch_size:
        raise ValueError(f"one sample call asks for algo.batch_size x algo.batches_per_request x "
                         f"sampling.sequence_length = {steps} transitions, outside sampling.min_batch_size "
                         f"({sampling.min_batch_size}) .. sampling.max_batch_size ({sampling.max_batch_size}): "
                         f"change one of them")


KIND = LoopKind(
    name="sequences",
    summary="batches of fixed-length sequences of one env with a burn-in before each, from a replay buffer",
    collector_work="chunks",
    workload="rlfleet.coordinator.workloads.data_plane:DataPlaneWorkload",
    trainer="rlfleet.learner_worker.sequences:SequenceTrainer",
    check=_check,
)
