"""A memory task for recurrent learners, as raw chunks: a cue in the first row's observation says which of two
actions pays on the last row; the rows between observe nothing, so a memoryless policy gets 0.5 on average and only
a core that carries the cue through time gets 1."""

from __future__ import annotations

import numpy as np

from rlfleet.shared.policy.actors import Actor


def cue_observations(cue: np.ndarray, steps: int) -> np.ndarray:
    """[steps, N, 2]: the cue (-1 or +1) in column 0 of the first row, "now choose" in column 1 of the last."""
    obs = np.zeros((steps, len(cue), 2), np.float32)
    obs[0, :, 0] = 2 * cue - 1
    obs[-1, :, 1] = 1.0
    return obs


def cue_chunk(actor: Actor, rng: np.random.Generator, steps: int, envs: int, state_size: int) -> dict[str, np.ndarray]:
    """One chunk of `envs` whole episodes of `steps` rows, acted by `actor` exploring (log-probabilities recorded),
    each env's core state zero at the first row."""
    cue = rng.integers(0, 2, envs)
    obs = cue_observations(cue, steps)
    actions = np.zeros((steps, envs), np.int64)
    logp = np.zeros((steps, envs), np.float32)
    for t in range(steps):
        decision = actor.act(obs[t], explore=True, rng=rng)
        actions[t], logp[t] = decision.actions, decision.logp
    rewards = np.zeros((steps, envs), np.float32)
    rewards[-1] = (actions[-1] == cue).astype(np.float32)
    terminated = np.zeros((steps, envs), bool)
    terminated[-1] = True
    return {"obs": obs, "next_obs": np.roll(obs, -1, axis=0), "actions": actions, "rewards": rewards,
            "terminated": terminated, "truncated": np.zeros_like(terminated), "valid": np.ones_like(terminated),
            "logp": logp, "core_state": np.zeros((envs, state_size), np.float32)}


def recall_rate(actor: Actor, steps: int, episodes: int = 200) -> float:
    """The fraction of episodes whose last greedy action names the cue."""
    cue = np.arange(episodes) % 2
    obs = cue_observations(cue, steps)
    actor.reset()
    for t in range(steps):
        chosen = actor.greedy(obs[t])
    return float((chosen == cue).mean())
