"""Generalised advantage estimation over one chunk of T steps of N envs.

Two different flags enter, because they answer two different questions:

* `terminated` decides whether a step bootstraps: a terminated step has no future value, any other step
  (a time-limit truncation included) adds gamma * V(next_obs), and `next_obs` of a finished episode is its
  final observation (SAME_STEP autoreset), never the next episode's first.
* `ends` decides whether the advantage recursion reaches into the following row of the same column: it must
  not after a termination, a truncation (the next row belongs to a new episode) or any other cut the caller
  wants (an invalid step, or the step before one). A cut step's advantage is then its one-step TD error,
  which still bootstraps through `next_values` unless it terminated.

The chunk's last row has no successor inside the chunk, so it is always cut and bootstraps through its own
`next_values`: chunks are therefore independent and need no neighbour to be processed.
"""

from __future__ import annotations

import numpy as np


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    ends: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """All inputs [T, N] (T steps of N envs, one chunk). Returns (advantages, value targets), float32 [T, N].

    delta_t = r_t + gamma * (1 - terminated_t) * V(next_obs_t) - V(obs_t)
    A_t     = delta_t + gamma * lam * (1 - ends_t) * A_{t+1},  A_{T-1} = delta_{T-1}
    targets = A + values (the TD(lambda) return).
    """
    shape = np.shape(rewards)
    for name, arr in (("values", values), ("next_values", next_values), ("terminated", terminated), ("ends", ends)):
        if np.shape(arr) != shape:
            raise ValueError(f"{name} has shape {np.shape(arr)}, rewards has {shape}")
    if len(shape) != 2:
        raise ValueError(f"expected [T, N] arrays, got shape {shape}")
    r = np.asarray(rewards, np.float64)
    v = np.asarray(values, np.float64)
    boot = np.where(np.asarray(terminated, bool), 0.0, gamma * np.asarray(next_values, np.float64))
    carry = np.where(np.asarray(ends, bool), 0.0, gamma * lam)
    deltas = r + boot - v
    advantages = np.empty(shape, np.float64)
    running = np.zeros(shape[1], np.float64)
    for t in range(shape[0] - 1, -1, -1):
        running = deltas[t] + carry[t] * running  # at t = T-1 running is still zero: A = delta
        advantages[t] = running
    return advantages.astype(np.float32), (advantages + v).astype(np.float32)
