"""The chunk schema: the one definition of a payload's columns, derived from the run's spaces.

The collector allocates its arrays from it, the codec checks every decoded payload against it, the learner
reads exactly these columns, and shared/payloads/contracts.py publishes it (with COLUMN_DOCS) as a JSON Schema for
third-party collectors. Per-step columns are [T, N, *per_step_shape]: step t of env column i.

Two layouts. The flat one stores `obs` and `next_obs` on every row. A run whose observations are stacks of uint8
image frames (its env wrappers end with `frame_stack`: shared/config/plan.py `stacked_frames`) stores each frame
once instead (the compact layout): 4x84x84 stacks cost 56,448 bytes per env step flat, one 7,056-byte frame
compact. The learner rebuilds `obs` and `next_obs` from it (shared/payloads/framestack.py) before any algorithm
sees the chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, MultiDiscreteActions, Spaces

# 2: the compact layout of frame-stacked image runs (a chunk of such a run no longer holds `obs`/`next_obs`).
SCHEMA_VERSION = 2
# What each column holds, published in the chunk JSON Schema: a column without a line here fails its build.
COLUMN_DOCS = {
    "obs": ("the observation the action was chosen on: per-step shape spaces.obs.shape, dtype spaces.obs.dtype "
            "(float32, or uint8 images kept as uint8)"),
    "next_obs": ("the observation after the step, like obs; for a finished episode its true last observation, "
                 "not the next episode's first"),
    "actions": ("what the policy produced, in the policy's own units: int64 [] for discrete, int64 [len(nvec)] "
                "for multidiscrete, float32 [dim] for box (before clipping or rescaling into the env's bounds)"),
    "rewards": "float32 []: the reward the learner trains on",
    "terminated": "bool []: the episode ended in a terminal state (no bootstrap)",
    "truncated": "bool []: the episode was cut (time limit or env error); the learner bootstraps from next_obs",
    "valid": ("bool []: false where the env raised or returned a non-finite reward or observation; such a step "
              "is never trained on, and its row is also truncated"),
    "logp": ("float32 []: the behaviour policy's log-probability of the action; present exactly when the task's "
             "behaviour.sample is true"),
    "frame": ("compact layout only, instead of obs: the newest frame of the row's observation (obs[t, i, -1]), "
              "uint8 [*frame]; the observation is the last k frames of its episode, the first frame repeated "
              "before the episode's start (gymnasium FrameStackObservation's 'reset' padding)"),
    "history": ("compact layout only, [N, k-1, *frame] (per env, not per step): the k-1 frames before each env's "
                "first row, oldest first (obs[0, i, :-1])"),
    "tail_frame": ("compact layout only, [N, *frame] (per env): the newest frame of the observation after each "
                   "env's last row (its next_obs when that row does not end the episode)"),
    "final_frame": ("compact layout only, [E, *frame], one per row that ends an episode (terminated or truncated), "
                    "in row order: the newest frame of that row's true final observation; its next_obs is the "
                    "row's stack shifted by one with this frame last, or, on a row whose valid is false (the env "
                    "was reset), this frame repeated k times"),
}
# Where a column's leading axes come from: every step of every env ([T, N]), every env ([N]) or every row that
# ends an episode ([E]).
Per = Literal["step", "env", "end"]


# The largest magnitude a float value on a valid row may have. Squared in a loss, 1e9 stays far inside float32
# (1e18 of 3.4e38), and so do discounted sums of it; a larger reward or observation is no env's honest output
# but a value that turns the next update into inf and ends the learner (TrainingDiverged) at every restart.
MAX_MAGNITUDE = 1e9


class SchemaError(ValueError):
    """Arrays that do not match the run's chunk schema."""


@dataclass(frozen=True)
class Column:
    dtype: str
    shape: tuple[int, ...]  # after the leading axes
    per: Per = "step"


@dataclass(frozen=True)
class ChunkSchema:
    columns: Mapping[str, Column]
    # Discrete action spaces: each action component's count (Discrete n: one; MultiDiscrete: nvec); Box: None.
    action_counts: tuple[int, ...] | None = None
    # The compact layout's frames per observation (k); None: the flat layout.
    stack: int | None = None

    @classmethod
    def of(cls, spaces: Spaces, behaviour_logp: bool, stack: int | None = None) -> ChunkSchema:
        """The columns of a run with these spaces; `stack` (shared/config/plan.py `stacked_frames`) picks the
        compact layout."""
        obs = Column(spaces.obs.dtype, spaces.obs.shape)
        action = spaces.action
        if isinstance(action, BoxActions):
            actions = Column("float32", (action.dim,))
        elif isinstance(action, MultiDiscreteActions):
            actions = Column("int64", (len(action.nvec),))
        else:
            actions = Column("int64", ())
        counts = None if isinstance(action, BoxActions) else (
            (action.n,) if isinstance(action, DiscreteActions) else tuple(action.nvec))
        columns = {"obs": obs, "next_obs": obs, "actions": actions, "rewards": Column("float32", ()),
                   "terminated": Column("bool", ()), "truncated": Column("bool", ()), "valid": Column("bool", ())}
        if stack is not None:
            if spaces.obs.dtype != "uint8" or len(spaces.obs.shape) < 3 or spaces.obs.shape[0] != stack:
                raise ValueError(f"the compact layout needs stacks of {stack} uint8 image frames, the observations "
                                 f"are {spaces.obs.dtype}{list(spaces.obs.shape)}")
            frame = spaces.obs.shape[1:]
            del columns["obs"], columns["next_obs"]
            columns.update({"frame": Column("uint8", frame), "history": Column("uint8", (stack - 1, *frame), "env"),
                            "tail_frame": Column("uint8", frame, "env"),
                            "final_frame": Column("uint8", frame, "end")})
        if behaviour_logp:
            columns["logp"] = Column("float32", ())
        return cls(columns, counts, stack)

    def allocate(self, steps: int, num_envs: int) -> dict[str, np.ndarray]:
        """Empty arrays for a chunk (valid starts all True: a step is valid unless the env failed). Per-end
        columns start with no rows: the writer stacks them once it knows where the episodes end."""
        lead = {"step": (steps, num_envs), "env": (num_envs,), "end": (0,)}
        arrays = {name: np.empty((*lead[col.per], *col.shape), col.dtype) for name, col in self.columns.items()}
        arrays["valid"][:] = True
        return arrays

    def check(self, arrays: Mapping[str, np.ndarray], num_envs: int | None = None) -> None:
        """Raise SchemaError unless `arrays` holds exactly these columns with one [T, N] and these dtypes (and,
        in the compact layout, one final frame per row that ends an episode)."""
        missing = sorted(set(self.columns) - set(arrays))
        extra = sorted(set(arrays) - set(self.columns))
        if missing or extra:
            raise SchemaError(f"columns differ from the run's chunk schema: missing {missing}, unexpected {extra}")
        lead = arrays["rewards"].shape
        if len(lead) != 2 or (num_envs is not None and lead[1] != num_envs):
            raise SchemaError(f"rewards has shape {lead}, expected [steps, {num_envs or 'envs'}]")
        for name in ("terminated", "truncated"):  # the per-end lead is counted from them: check them first
            self._check_column(arrays, name, lead)
        ends = int(np.count_nonzero(arrays["terminated"] | arrays["truncated"])) if self.stack is not None else 0
        leads = {"step": lead, "env": lead[1:], "end": (ends,)}
        for name, col in self.columns.items():
            self._check_column(arrays, name, leads[col.per])

    def _check_column(self, arrays: Mapping[str, np.ndarray], name: str, lead: tuple[int, ...]) -> None:
        col, arr = self.columns[name], arrays[name]
        if arr.dtype.name != col.dtype or arr.shape != (*lead, *col.shape):
            why = (f" (one frame per row that ends an episode: {lead[0]} rows are terminated or truncated)"
                   if col.per == "end" else "")
            raise SchemaError(f"column {name!r} is {arr.dtype.name}{list(arr.shape)}, the schema says "
                              f"{col.dtype}{[*lead, *col.shape]}{why}")

    def check_values(self, arrays: Mapping[str, np.ndarray], rows: int) -> None:
        """Raise SchemaError when the content disagrees with the chunk's report; call it after `check`.

        `check` only proves the shapes. A payload whose hash and shapes are right can still hold fewer rows than
        its report (the sampled offsets then index past its end), a discrete action outside the space (an
        out-of-range gather), or a NaN or huge reward or observation (a non-finite loss): each stopped a learner at
        every restart, since the chunk stayed in the buffer. So on every valid row the discrete actions must lie
        in the space and every float value be finite and within ±MAX_MAGNITUDE. Rows where the env failed
        (valid = false) are not checked: every learner already treats them as padding whatever they hold
        (tests/support/learner_data.py's `garbage`)."""
        got = int(arrays["rewards"].size)
        if got != rows:
            raise SchemaError(f"the payload holds {got} rows, its report said {rows}")
        valid = arrays["valid"].reshape(-1)
        for name, col in self.columns.items():
            if col.per != "step":  # only the compact layout's uint8 frames: no value of theirs is out of range
                continue
            flat = arrays[name].reshape(rows, -1)
            if name == "actions" and self.action_counts is not None:
                bad = ((flat < 0) | (flat >= np.asarray(self.action_counts))).any(axis=1)
                what = f"outside the action space {list(self.action_counts)}"
            elif col.dtype.startswith("float"):
                with np.errstate(invalid="ignore"):
                    bad = ~(np.abs(flat) <= MAX_MAGNITUDE).all(axis=1)  # NaN fails the comparison too
                what = f"non-finite or beyond ±{MAX_MAGNITUDE:g}"
            else:
                continue
            bad &= valid
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise SchemaError(f"column {name!r} is {what} on {int(bad.sum())} valid row(s), first row {row}: "
                                  f"{flat[row].tolist()[:8]}")
