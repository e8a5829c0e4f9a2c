"""n-step targets computed per chunk, never reaching past an episode end or the chunk's last step.

A window cut short by the chunk boundary yields a shorter (still valid) k-step target bootstrapped from the
state where it stopped, so chunks can be loaded independently, in any order.
"""

from __future__ import annotations

import numpy as np


def nstep_windows(
    rewards: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For [T, N] arrays: (returns [T, N], bootstrap row [T, N], bootstrap discount [T, N]).

    Row t's window covers rows t .. b (b the bootstrap row, at most t + n - 1): target = returns + discount *
    V(the state after row b), i.e. of row b's next observation. discount is gamma**(b - t + 1), or 0 when the
    window ended in a termination. Truncation stops the window but still bootstraps from the final observation.
    A learner of a recurrent core needs the row, not only its observation: the state after row b goes with it.
    """
    steps = rewards.shape[0]
    returns = np.zeros(rewards.shape, np.float64)
    boot_index = np.zeros(rewards.shape, np.int64)
    boot_terminal = np.zeros(rewards.shape, bool)
    length = np.zeros(rewards.shape, np.int64)
    alive = np.ones(rewards.shape, bool)
    for k in range(min(n, steps)):  # a window can never be longer than the chunk
        valid = alive.copy()
        valid[steps - k:] = False  # t + k would be past the chunk's end
        src = slice(k, steps)
        dst = slice(0, steps - k)
        v = valid[dst]
        returns[dst] += np.where(v, gamma**k * rewards[src], 0.0)
        boot_index[dst] = np.where(v, np.arange(k, steps)[:, None], boot_index[dst])
        boot_terminal[dst] = np.where(v, terminated[src], boot_terminal[dst])
        length[dst] = np.where(v, k + 1, length[dst])
        ended = np.zeros(rewards.shape, bool)
        ended[dst] = terminated[src] | truncated[src]
        alive = valid & ~ended
    discount = np.where(boot_terminal, 0.0, gamma ** length.astype(np.float64))
    return returns.astype(np.float32), boot_index, discount.astype(np.float32)


def nstep_targets(
    rewards: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    next_obs: np.ndarray,
    gamma: float,
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For [T, N] arrays: (returns [T, N], bootstrap obs [T, N, *obs], bootstrap discount [T, N]).

    target = returns + discount * Q(bootstrap obs); discount is gamma**k, or 0 when the window ended in a
    termination. Truncation stops the window but still bootstraps from the final observation.
    """
    returns, boot_index, discount = nstep_windows(rewards, terminated, truncated, gamma, n)
    cols = np.arange(rewards.shape[1])[None, :]
    return returns, next_obs[boot_index, cols], discount  # obs keep their dtype (uint8)
