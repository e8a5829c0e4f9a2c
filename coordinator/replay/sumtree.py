"""Sum tree (plus a parallel min tree) over replay-item weights, for proportional sampling in O(log n).

Layout: an implicit binary heap in one float64 array per tree; node 1 is the root, node k has children 2k and
2k+1, and leaf i lives at node `size + i` where `size` is the capacity rounded up to a power of two (the padding
leaves stay 0 and are never sampled). Every operation is batched: one numpy step per tree level.

Why `set` recomputes parents from their children instead of adding deltas: with deltas every update leaves
rounding error behind, it accumulates over millions of priority updates, and a subtree whose leaves are all 0
ends up holding a residue like 1e-17 that `find` can walk into. Recomputed, every node is exactly
`left + right` of the current leaves, so a subtree sums to 0.0 exactly when all its leaves are 0 and the root
never drifts from the leaves. That exactness is what makes `find` safe: a target that rounding strands on a 0
leaf is detected by that leaf's exact 0 and searched again, stepping only into positive children.
"""

from __future__ import annotations

import operator

import numpy as np


class SumTree:
    """Sum and min over `capacity` non-negative leaf values, for proportional sampling of replay entries."""

    def __init__(self, capacity: int) -> None:
        capacity = operator.index(capacity)
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._size = 1 << (capacity - 1).bit_length()
        self._depth = self._size.bit_length() - 1           # levels between the root and the leaves
        self._sums = np.zeros(2 * self._size, np.float64)    # node 0 unused
        self._mins = np.full(2 * self._size, np.inf)          # min over positive leaves; inf for none

    # ----- updates ---------------------------------------------------------------------------------------
    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaves `idx` to `values` (finite, >= 0; 0 = not sampleable); the last duplicate index wins."""
        leaves = self._leaf_index(idx)
        vals = np.asarray(values, np.float64).ravel()
        if vals.shape != leaves.shape:
            raise ValueError(f"{leaves.size} indices but {vals.size} values")
        if not np.all(np.isfinite(vals) & (vals >= 0)):
            raise ValueError("sum-tree values must be finite and >= 0")
        if leaves.size == 0:
            return
        if leaves.size > 1 and not np.all(leaves[1:] > leaves[:-1]):
            # unique of the reversed batch keeps each index's first reversed = last original occurrence
            leaves, first = np.unique(leaves[::-1], return_index=True)
            vals = vals[::-1][first]
        pos = leaves + self._size                                # sorted and unique from here on
        self._sums[pos] = vals
        self._mins[pos] = np.where(vals > 0, vals, np.inf)
        if pos[-1] - pos[0] == pos.size - 1:
            self._set_parents_of_range(int(pos[0]), int(pos[-1]))
            return
        for _ in range(self._depth):
            pos = pos >> 1
            if pos.size > 1:
                keep = np.empty(pos.size, bool)
                keep[0] = True
                np.not_equal(pos[1:], pos[:-1], out=keep[1:])
                pos = pos[keep]
            left = pos << 1
            right = left + 1
            self._sums[pos] = self._sums.take(left) + self._sums.take(right)
            self._mins[pos] = np.minimum(self._mins.take(left), self._mins.take(right))

    def clear_leaves(self, idx: np.ndarray) -> None:
        """Zero leaves WITHOUT updating their ancestors: only for a caller that `set`s a batch covering them
        right after (a chunk overwriting the ring), which recomputes those ancestors once instead of twice."""
        pos = self._leaf_index(idx) + self._size
        self._sums[pos] = 0.0
        self._mins[pos] = np.inf

    def _set_parents_of_range(self, lo: int, hi: int) -> None:
        """Recompute the ancestors of the contiguous nodes lo..hi with slices while a level has several, then
        one scalar node per level (a chunk's rows are contiguous slots: the common case, several times cheaper
        than gathering by index)."""
        sums, mins = self._sums, self._mins
        while lo > 1 and hi > lo:
            lo, hi = lo >> 1, hi >> 1
            np.add(sums[2 * lo:2 * hi + 2:2], sums[2 * lo + 1:2 * hi + 2:2], out=sums[lo:hi + 1])
            np.minimum(mins[2 * lo:2 * hi + 2:2], mins[2 * lo + 1:2 * hi + 2:2], out=mins[lo:hi + 1])
        while lo > 1:
            lo >>= 1
            left = 2 * lo
            sums[lo] = sums.item(left) + sums.item(left + 1)
            mins[lo] = min(mins.item(left), mins.item(left + 1))

    # ----- queries ---------------------------------------------------------------------------------------
    def get(self, idx: np.ndarray) -> np.ndarray:
        """Leaf values at `idx`."""
        return self._sums[self._leaf_index(idx) + self._size]

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._sums[1])

    @property
    def min(self) -> float:
        """Smallest positive leaf; math.inf when no leaf is positive."""
        return float(self._mins[1])

    @property
    def nbytes(self) -> int:
        return int(self._sums.nbytes + self._mins.nbytes)

    def find(self, targets: np.ndarray) -> np.ndarray:
        """Leaf i with prefix(i) <= t < prefix(i) + leaf(i) for each t in [0, total), always a positive leaf.

        Targets below 0 act as 0 and targets at or above `total` as just below it: still a positive leaf.
        """
        if not self._sums[1] > 0:
            raise ValueError("cannot search a sum tree whose total is 0")
        t = np.maximum(np.asarray(targets, np.float64).ravel(), 0.0)
        if np.isnan(t).any():
            raise ValueError("sum-tree targets must not be NaN")
        leaves = self._descend(t, guarded=False)
        # Rounding can still strand a target: t next to `total`, or `t - left` computed a hair above a right
        # child whose own right half is 0. Those few (and only those) land on a 0 leaf; redo them guarded.
        stranded = self._sums.take(leaves + self._size) <= 0
        if stranded.any():
            leaves[stranded] = self._descend(t[stranded], guarded=True)
        return leaves

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` i.i.d. leaf indices (int64) with P(i) = leaf(i) / total."""
        return self.find(rng.random(n) * self.total)

    # ----- helpers ---------------------------------------------------------------------------------------
    def _descend(self, targets: np.ndarray, guarded: bool) -> np.ndarray:
        """Leaf indices for targets >= 0, one vectorised step per level: right when t >= left child's sum.

        `guarded` also requires the right child to be positive. Since the root is positive and a node with a
        0 left child goes right (t >= 0), every node visited is then positive and so is the leaf reached.
        """
        t = targets.copy()
        pos = np.ones(t.size, np.int64)
        for _ in range(self._depth):
            pos <<= 1                                             # left child
            left = self._sums.take(pos)
            go_right = t >= left
            if guarded:
                go_right &= self._sums.take(pos + 1) > 0
            np.subtract(t, left, out=t, where=go_right)
            pos += go_right
        return pos - self._size

    def _leaf_index(self, idx: np.ndarray) -> np.ndarray:
        """`idx` as a flat int64 array, checked to lie in [0, capacity)."""
        arr = np.asarray(idx).ravel()
        if arr.size == 0:
            return np.zeros(0, np.int64)
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"sum-tree indices must be integers, got dtype {arr.dtype}")
        if arr.min() < 0 or arr.max() >= self.capacity:
            raise ValueError(f"sum-tree index out of range [0, {self.capacity})")
        return arr.astype(np.int64, copy=False)
