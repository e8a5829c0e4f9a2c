"""The chunk schema: the one definition of a payload's columns, derived from the run's spaces.

The collector allocates its arrays from it, the codec checks every decoded payload against it, the learner
reads exactly these columns, and shared/payloads/contracts.py publishes it (with COLUMN_DOCS) as a JSON Schema for
third-party collectors. Every column is [T, N, *per_step_shape]: step t of env column i.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from shared.payloads.spaces import BoxActions, DiscreteActions, MultiDiscreteActions, Spaces

SCHEMA_VERSION = 1
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
}


# The largest magnitude a float value on a valid row may have. Squared in a loss, 1e9 stays far inside float32
# (1e18 of 3.4e38), and so do discounted sums of it; a larger reward or observation is no env's honest output
# but a value that turns the next update into inf and ends the learner (TrainingDiverged) at every restart.
MAX_MAGNITUDE = 1e9


class SchemaError(ValueError):
    """Arrays that do not match the run's chunk schema."""


@dataclass(frozen=True)
class Column:
    dtype: str
    shape: tuple[int, ...]  # per step, after [T, N]


@dataclass(frozen=True)
class ChunkSchema:
    columns: Mapping[str, Column]
    # Discrete action spaces: each action component's count (Discrete n: one; MultiDiscrete: nvec); Box: None.
    action_counts: tuple[int, ...] | None = None

    @classmethod
    def of(cls, spaces: Spaces, behaviour_logp: bool) -> ChunkSchema:
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
        if behaviour_logp:
            columns["logp"] = Column("float32", ())
        return cls(columns, counts)

    def allocate(self, steps: int, num_envs: int) -> dict[str, np.ndarray]:
        """Empty arrays for a chunk (valid starts all True: a step is valid unless the env failed)."""
        arrays = {name: np.empty((steps, num_envs, *col.shape), col.dtype) for name, col in self.columns.items()}
        arrays["valid"][:] = True
        return arrays

    def check(self, arrays: Mapping[str, np.ndarray], num_envs: int | None = None) -> None:
        """Raise SchemaError unless `arrays` holds exactly these columns with one [T, N] and these dtypes."""
        missing = sorted(set(self.columns) - set(arrays))
        extra = sorted(set(arrays) - set(self.columns))
        if missing or extra:
            raise SchemaError(f"columns differ from the run's chunk schema: missing {missing}, unexpected {extra}")
        lead = arrays["rewards"].shape
        if len(lead) != 2 or (num_envs is not None and lead[1] != num_envs):
            raise SchemaError(f"rewards has shape {lead}, expected [steps, {num_envs or 'envs'}]")
        for name, col in self.columns.items():
            arr = arrays[name]
            if arr.dtype.name != col.dtype or arr.shape != (*lead, *col.shape):
                raise SchemaError(f"column {name!r} is {arr.dtype.name}{list(arr.shape)}, the schema says "
                                  f"{col.dtype}{[*lead, *col.shape]}")

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
