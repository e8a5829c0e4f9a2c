"""Shuffled minibatches of a batch's rows, for the learners that take several gradient steps per epoch (those with
an `algo.minibatch_size`).

Each epoch shuffles the rows with the learner's own generator (saved in its checkpoint, so a resumed run draws the
same minibatches) and splits them into runs of `minibatch_size`. The last, shorter run is kept as its own
minibatch; a single leftover row is merged into the one before instead, because one row has no spread to normalise
its advantage by. In a learner group every rank must take the same number of steps (each step's all-reduce waits for
all of them): as many as one learner would take on all ranks' rows, each rank's own rows split evenly among them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # torch.distributed is imported only where a group trains
    from rlfleet.learner_worker.distributed import Group


def minibatch_count(rows: int, minibatch_size: int) -> int:
    """How many minibatches one epoch over `rows` rows takes: runs of `minibatch_size`, the last shorter one
    kept unless it would be a single row (merged into the one before)."""
    count = -(-rows // minibatch_size)
    return count - 1 if count > 1 and rows % minibatch_size == 1 else count


def shuffled_minibatches(rows: int, minibatch_size: int, generator: torch.Generator, group: Group | None,
                         device: torch.device) -> list[torch.Tensor]:
    """One epoch's minibatches: index tensors into `rows` rows, on `device`, together covering each row once."""
    perm = torch.randperm(rows, generator=generator).to(device)
    if group is not None:
        total = int(group.sum(torch.tensor([rows])).item())
        return list(perm.tensor_split(minibatch_count(total, minibatch_size)))
    pieces = list(perm.split(minibatch_size))
    if len(pieces) > 1 and len(pieces[-1]) < 2:
        pieces[-2:] = [torch.cat(pieces[-2:])]
    return pieces
