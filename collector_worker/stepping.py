"""How a collector acts and steps its envs each chunk row: one forward pass then one vector step, or, with
`collector.double_buffer`, the two overlapped (Sample Factory's double-buffered sampling).

Double buffering splits the envs into two halves, each its own AsyncVectorEnv (subprocesses). A row goes:

    send A's actions | act for B   (A's envs step meanwhile)
    send B's actions | wait for A, act for A's next row   (B's envs step meanwhile)
    wait for B

so the policy's forward pass runs while envs step, never while every env waits for it. Only the first row of a
chunk acts for A with no env stepping. A's actions for row t + 1 are computed during row t with the policy of
row t; a chunk records them as they were sent, with their log-probabilities, as it records every action.
Every env still steps exactly once per row, with the action recorded in that row: chunks keep [T, N] and
everything else the sync path gives (SAME_STEP autoreset, final observations, env errors per column).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.run_config import EnvBackend
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.gymspaces import describe
from rlfleet.shared.envs.vector import make_async_env, make_collector_env
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.actors import Decision

StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
Act = Callable[[np.ndarray], Decision]  # observations of some envs -> their decision


def make_stepped_env(env: EnvConfig, num_envs: int, backend: EnvBackend, double_buffer: bool) -> VectorEnv:
    """The collector's vector env: `collector.env_backend`'s, in two halves under `collector.double_buffer`."""
    if double_buffer:
        return Halves(env, num_envs)
    return make_collector_env(env, num_envs, backend)


def spaces_of(vec: VectorEnv, env: EnvConfig) -> Spaces:
    """The spaces of one env of `vec`. Envs in subprocesses are described by one built here: where a Dict
    observation carries an action mask, only the env object itself says where the mask lies."""
    if isinstance(vec, AsyncVectorEnv | Halves):
        single = make_env(env, training=True)
        try:
            return describe(single)
        finally:
            single.close()
    return describe(vec)


def act_and_step(vec: VectorEnv, obs: np.ndarray, act: Act, first: bool, ahead: bool) -> tuple[Decision, StepResult]:
    """One chunk row: the decision for every env on `obs`, and what stepping them with it returned.

    `first`: the chunk's first row (nothing acted ahead may be used: it was acted for another chunk's settings);
    `ahead`: another row follows in this chunk (double buffering may act for it already)."""
    if isinstance(vec, Halves):
        return vec.act_and_step(obs, act, first, ahead)
    decision = act(obs)
    return decision, vec.step(decision.env_actions)


class Halves(VectorEnv):
    """`num_envs` envs as two AsyncVectorEnvs, envs [0, h) and [h, num_envs), seeded and ordered as one vector env
    of them all would be (env i gets seed + i), so that `step` is an ordinary vector env step and
    `act_and_step` the double-buffered one."""

    def __init__(self, env: EnvConfig, num_envs: int) -> None:
        self.split = num_envs // 2
        self.halves = (make_async_env(env, self.split), make_async_env(env, num_envs - self.split))
        self.num_envs = num_envs
        first = self.halves[0]
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self._ahead: Decision | None = None  # the first half's decision for the next row, acted during this one

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, list):
            raise ValueError("Halves seeds env i with seed + i: reset with one seed")
        self._ahead = None
        a, b = self.halves
        obs_a, info_a = a.reset(seed=seed, options=options)
        obs_b, info_b = b.reset(seed=None if seed is None else seed + self.split, options=options)
        return np.concatenate([obs_a, obs_b]), _joined(info_a, self.split, info_b, b.num_envs)

    def step(self, actions: Any) -> StepResult:
        a, b = self.halves
        a.step_async(actions[:self.split])
        b.step_async(actions[self.split:])
        return self._joined(a.step_wait(), b.step_wait())

    def act_and_step(self, obs: np.ndarray, act: Act, first: bool, ahead: bool) -> tuple[Decision, StepResult]:
        """One row, double-buffered (the module's doc); the decision and result are those of all the envs."""
        a, b = self.halves
        h = self.split
        decision_a = self._ahead if self._ahead is not None and not first else act(obs[:h])
        self._ahead = None
        a.step_async(decision_a.env_actions)
        decision_b = act(obs[h:])  # while A steps
        b.step_async(decision_b.env_actions)
        result_a = a.step_wait()
        if ahead:
            self._ahead = act(result_a[0])  # while B steps: A's next row
        result_b = b.step_wait()
        return _joined_decisions(decision_a, decision_b), self._joined(result_a, result_b)

    def _joined(self, a: StepResult, b: StepResult) -> StepResult:
        obs, rewards, terminated, truncated = (np.concatenate([x, y]) for x, y in zip(a[:4], b[:4], strict=True))
        return obs, rewards, terminated, truncated, _joined(a[4], self.split, b[4], self.num_envs - self.split)

    def close_extras(self, **kwargs: Any) -> None:
        for half in self.halves:
            half.close(**kwargs)


def _joined_decisions(a: Decision, b: Decision) -> Decision:
    logp = None if a.logp is None or b.logp is None else np.concatenate([a.logp, b.logp])
    return Decision(np.concatenate([a.actions, b.actions]), np.concatenate([a.env_actions, b.env_actions]), logp)


def _joined(a: dict[str, Any], na: int, b: dict[str, Any], nb: int) -> dict[str, Any]:
    """The infos of two vector envs of na and nb envs as one vector env of all of them gives it: per key an
    array over every env (the value gymnasium gives an env without the key, zeros or None, where one half lacks
    it) with its `_key` mask, nested dicts joined alike."""
    joined: dict[str, Any] = {}
    for key in a.keys() | b.keys():
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) or isinstance(y, dict):
            joined[key] = _joined(x or {}, na, y or {}, nb)
        else:
            joined[key] = np.concatenate([_column(x, y, na), _column(y, x, nb)])
    return joined


def _column(value: Any, other: Any, n: int) -> np.ndarray:
    """`value` (an info array over n envs), or, where that half has no such key, what gymnasium puts for envs
    without it in an array like `other`."""
    if value is not None:
        return np.asarray(value)
    like = np.asarray(other)
    if like.dtype == object:
        return np.full(n, None, dtype=object)
    return np.zeros((n, *like.shape[1:]), like.dtype)

