"""V-trace (Espeholt et al. 2018, section 4): off-policy value targets and policy-gradient advantages
for one chunk of T steps of N envs acted by a behaviour policy mu, learned by a target policy pi.

With truncated importance weights rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)) and
c_t = lam * min(c_bar, pi(a_t|x_t) / mu(a_t|x_t)):

  delta_t = rho_t * (r_t + gamma_t * V(next_obs_t) - V(obs_t))
  v_t     = V(obs_t) + delta_t + gamma * c_t * (v_{t+1} - V(obs_{t+1}))   while the episode goes on in row t+1
  A_t     = rho_t * (r_t + gamma_t * v'_{t+1} - V(obs_t))                 the policy-gradient advantage

where gamma_t = 0 for a terminated step and gamma otherwise, and v'_{t+1} is v_{t+1} while the episode goes
on and V(next_obs_t) where it does not. rho_bar bounds the fixed point the values converge to (rho_bar = 1:
the value of pi itself); c_bar only bounds how far the correction reaches back (variance). On-policy data
(pi = mu, rho_bar, c_bar >= 1, lam = 1) gives v = the n-step return to the chunk's end, bootstrapped there,
and A = the lambda = 1 GAE advantage.

Episode ends enter as in learner_worker/gae.py: `terminated` stops bootstrapping (no future value), `ends`
stops the recursion at that row (terminated, truncated, or any cut the caller wants, such as an invalid
step). A truncated step still bootstraps from V(next_obs), its true final observation. The chunk's last row
always ends the recursion and bootstraps from its own next value, so chunks are independent.
"""

from __future__ import annotations

import numpy as np


def vtrace(
    behaviour_logp: np.ndarray,
    target_logp: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    ends: np.ndarray,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    lam: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """All inputs [T, N]. Returns float64 [T, N] arrays: (v-trace targets v, policy-gradient advantages A)."""
    shape = np.shape(rewards)
    if len(shape) != 2:
        raise ValueError(f"expected [T, N] arrays, got shape {shape}")
    named = {"behaviour_logp": behaviour_logp, "target_logp": target_logp, "values": values,
             "next_values": next_values, "terminated": terminated, "ends": ends}
    for name, arr in named.items():
        if np.shape(arr) != shape:
            raise ValueError(f"{name} has shape {np.shape(arr)}, rewards has {shape}")
    if rho_bar <= 0 or c_bar <= 0 or not 0 <= lam <= 1:
        raise ValueError(f"need rho_bar > 0, c_bar > 0 and 0 <= lam <= 1, got {rho_bar}, {c_bar}, {lam}")
    log_ratio = np.asarray(target_logp, np.float64) - np.asarray(behaviour_logp, np.float64)
    # Clipped in log space: a wildly stale behaviour log-prob cannot overflow exp().
    rho = np.exp(np.minimum(log_ratio, np.log(rho_bar)))
    c = lam * np.exp(np.minimum(log_ratio, np.log(c_bar)))
    r = np.asarray(rewards, np.float64)
    v = np.asarray(values, np.float64)
    bootstrap = np.where(np.asarray(terminated, bool), 0.0, gamma * np.asarray(next_values, np.float64))
    goes_on = ~np.asarray(ends, bool)
    deltas = rho * (r + bootstrap - v)
    corrections = np.empty(shape, np.float64)  # v_t - V(obs_t)
    running = np.zeros(shape[1], np.float64)
    for t in range(shape[0] - 1, -1, -1):
        running = deltas[t] + np.where(goes_on[t], gamma * c[t] * running, 0.0)
        corrections[t] = running
    targets = v + corrections
    next_targets = np.asarray(next_values, np.float64).copy()  # v'_{t+1}; the last row's is V(next_obs)
    next_targets[:-1] = np.where(goes_on[:-1], targets[1:], next_targets[:-1])
    advantages = rho * (r + np.where(np.asarray(terminated, bool), 0.0, gamma * next_targets) - v)
    return targets, advantages
