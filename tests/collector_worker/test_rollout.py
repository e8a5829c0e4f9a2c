"""Rollout on real gymnasium CartPole: chunk layout, transitions across resets, episode stats, epsilon."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.collector_worker.rollout import Chunk, Rollout
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.policy.actors import PolicyError
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.policies import CARTPOLE as CARTPOLE_SPACES
from tests.support.policies import EPSILON_GREEDY, PENDULUM, SAMPLING, manifest, policy_state

torch.set_num_threads(1)

CARTPOLE = "CartPole-v1"
CARTPOLE5 = "RlfleetTestRollout/CartPole5-v1"  # time limit of 5 steps: every episode is truncated
if CARTPOLE5 not in gym.registry:
    gym.register(id=CARTPOLE5, entry_point="gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=5)

Q_POLICY = manifest(CARTPOLE_SPACES, "q_values", (16,))


def make(env_id: str = CARTPOLE, num_envs: int = 3, seed: int = 0) -> Rollout:
    """A rollout acting epsilon-greedily with a randomly initialised Q-network."""
    rollout = Rollout(EnvConfig(id=env_id), num_envs, CARTPOLE_SPACES, EPSILON_GREEDY, seed)
    rollout.load_policy(Q_POLICY, policy_state(Q_POLICY, seed))
    return rollout


def collect(rollout: Rollout, sizes: list[int], epsilon: float) -> list[Chunk]:
    try:
        return [rollout.collect(steps, epsilon) for steps in sizes]
    finally:
        rollout.close()


def cat(chunks: list[Chunk], name: str) -> np.ndarray:
    return np.concatenate([c.arrays[name] for c in chunks])


def is_reset_state(obs: np.ndarray) -> bool:
    return bool(np.all(np.abs(obs) <= 0.05))


def test_chunk_shapes_and_dtypes():
    (chunk,) = collect(make(num_envs=3), [20], epsilon=0.5)
    arrays = chunk.arrays
    assert set(arrays) == {"obs", "actions", "rewards", "terminated", "truncated", "next_obs", "valid"}
    assert arrays["obs"].shape == arrays["next_obs"].shape == (20, 3, 4)
    for name in ("actions", "rewards", "terminated", "truncated"):
        assert arrays[name].shape == (20, 3), name
    assert arrays["obs"].dtype == np.float32 and arrays["next_obs"].dtype == np.float32
    assert arrays["rewards"].dtype == np.float32
    assert arrays["actions"].dtype == np.int64
    assert arrays["terminated"].dtype == np.bool_ and arrays["truncated"].dtype == np.bool_
    assert arrays["valid"].dtype == np.bool_ and arrays["valid"].all() and chunk.env_errors == 0
    assert chunk.env_steps == 60
    assert set(np.unique(arrays["actions"])) <= {0, 1}
    assert np.all(arrays["rewards"] == 1.0)


def test_transitions_chain_and_reset_after_episode_end():
    chunks = collect(make(num_envs=3, seed=1), [40, 40], epsilon=1.0)
    obs, next_obs = cat(chunks, "obs"), cat(chunks, "next_obs")
    done = cat(chunks, "terminated") | cat(chunks, "truncated")
    assert done.sum() >= 6, "random CartPole episodes should end several times in 80 steps"
    assert is_reset_state(obs[0])
    for t in range(len(obs) - 1):  # includes the boundary between the two chunks
        for i in range(3):
            if done[t, i]:
                # next_obs is the final observation, obs[t+1] a fresh reset state
                assert is_reset_state(obs[t + 1, i]), (t, i)
                assert not np.array_equal(next_obs[t, i], obs[t + 1, i]), (t, i)
            else:
                np.testing.assert_array_equal(next_obs[t, i], obs[t + 1, i], err_msg=f"t={t} env={i}")


def test_terminated_final_obs_is_out_of_bounds():
    """A CartPole termination happens because the pole or cart left its bounds: next_obs must show it."""
    chunks = collect(make(num_envs=2, seed=2), [100], epsilon=1.0)
    term = cat(chunks, "terminated")
    next_obs = cat(chunks, "next_obs")
    assert term.any()
    for t, i in zip(*np.nonzero(term), strict=True):
        x, theta = next_obs[t, i, 0], next_obs[t, i, 2]
        assert abs(x) > 2.4 or abs(theta) > 12 * 2 * np.pi / 360, (t, i, next_obs[t, i])
    # and no non-terminal transition is out of bounds
    live = ~term
    assert np.all(np.abs(next_obs[live][:, 2]) <= 12 * 2 * np.pi / 360)


def replay(env_id: str, seed: int, num_envs: int, actions: np.ndarray) -> dict[str, np.ndarray]:
    """Replay each env alone with the collected actions: the reference for every chunk column."""
    steps = len(actions)
    out = {"obs": np.zeros((steps, num_envs, 4), np.float32), "next_obs": np.zeros((steps, num_envs, 4), np.float32),
           "rewards": np.zeros((steps, num_envs), np.float32), "terminated": np.zeros((steps, num_envs), bool),
           "truncated": np.zeros((steps, num_envs), bool)}
    episodes: list[tuple[int, int, float, int]] = []  # (t, env, return, length)
    for i in range(num_envs):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed + i)
        ret, length = 0.0, 0
        for t in range(steps):
            out["obs"][t, i] = obs
            nxt, rew, term, trunc, _ = env.step(int(actions[t, i]))
            out["next_obs"][t, i], out["rewards"][t, i] = nxt, rew
            out["terminated"][t, i], out["truncated"][t, i] = term, trunc
            ret, length = ret + rew, length + 1
            if term or trunc:
                episodes.append((t, i, ret, length))
                ret, length = 0.0, 0
                obs, _ = env.reset()
            else:
                obs = nxt
        env.close()
    out["episodes"] = sorted(episodes)
    return out


@pytest.mark.parametrize("env_id", [CARTPOLE, CARTPOLE5])
def test_chunks_match_single_env_replay(env_id: str):
    sizes = [7, 13, 30]
    chunks = collect(make(env_id, num_envs=3, seed=5), sizes, epsilon=1.0)
    actions = cat(chunks, "actions")
    ref = replay(env_id, 5, 3, actions)
    for name in ("obs", "next_obs", "rewards", "terminated", "truncated"):
        np.testing.assert_array_equal(cat(chunks, name), ref[name], err_msg=name)
    # episodes per chunk, in (step, env) order, with returns and lengths spanning chunk boundaries
    bounds = np.cumsum([0, *sizes])
    for c, chunk in enumerate(chunks):
        expected = [(r, n, None) for t, _, r, n in ref["episodes"] if bounds[c] <= t < bounds[c + 1]]
        assert chunk.episodes == expected, c


def test_truncation_kept_apart_from_termination():
    chunks = collect(make(CARTPOLE5, num_envs=2, seed=0), [12], epsilon=1.0)
    (chunk,) = chunks
    term, trunc = chunk.arrays["terminated"], chunk.arrays["truncated"]
    assert not term.any()
    expected = np.zeros((12, 2), bool)
    expected[[4, 9]] = True  # the 5th step of each episode
    np.testing.assert_array_equal(trunc, expected)
    assert chunk.episodes == [(5.0, 5, None)] * 4
    # the truncated step still carries the true final observation (not the reset state)
    obs, next_obs = chunk.arrays["obs"], chunk.arrays["next_obs"]
    for t in (4, 9):
        assert is_reset_state(obs[t + 1])
        assert not np.array_equal(next_obs[t], obs[t + 1])
        assert not is_reset_state(next_obs[t])  # 5 random pushes move the cart away from the start


def test_episode_started_in_one_chunk_finished_in_next_reports_full_length():
    rollout = make(CARTPOLE5, num_envs=2, seed=0)
    first, second, third = collect(rollout, [3, 3, 4], epsilon=1.0)
    assert first.episodes == []
    assert second.episodes == [(5.0, 5, None), (5.0, 5, None)]  # 3 steps in chunk 1 + 2 in chunk 2
    assert third.episodes == [(5.0, 5, None), (5.0, 5, None)]   # steps 6..10


def test_episode_stats_on_cartpole_span_chunks():
    rollout = make(CARTPOLE, num_envs=2, seed=7)
    chunks = collect(rollout, [6] * 15, epsilon=1.0)
    # reference from the flags alone
    done = cat(chunks, "terminated") | cat(chunks, "truncated")
    rewards = cat(chunks, "rewards")
    ref, spans = [], False
    start = np.zeros(2, int)
    for t in range(len(done)):
        for i in range(2):
            if done[t, i]:
                ref.append((float(rewards[start[i]:t + 1, i].sum()), t + 1 - start[i], None))
                spans |= start[i] // 6 != t // 6
                start[i] = t + 1
    assert spans, "some episode must cross a chunk boundary for this test to mean anything"
    assert [e for c in chunks for e in c.episodes] == ref
    assert all(r == float(n) for r, n, _ in ref)  # CartPole: reward 1 per step


def test_epsilon_one_is_uniform():
    rollout = make(num_envs=4, seed=3)
    try:
        obs = rollout.obs
        greedy = rollout.actor.greedy(obs)
        actions = np.stack([rollout.act(obs, 1.0, random=False).actions for _ in range(1000)])
    finally:
        rollout.close()
    assert actions.shape == (1000, 4) and actions.dtype == np.int64
    frac = (actions == 1).mean(axis=0)
    assert np.all(np.abs(frac - 0.5) < 0.05), frac
    # the net's (fixed) choice is taken only half the time
    assert np.all(np.abs((actions == greedy).mean(axis=0) - 0.5) < 0.05)


def test_epsilon_partial_explores_at_that_rate():
    rollout = make(num_envs=4, seed=3)
    try:
        obs = rollout.obs
        greedy = rollout.actor.greedy(obs)
        actions = np.stack([rollout.act(obs, 0.3, random=False).actions for _ in range(2000)])
    finally:
        rollout.close()
    # exploring picks uniformly among 2 actions, so a non-greedy action has probability 0.3 / 2
    assert abs((actions != greedy).mean() - 0.15) < 0.02


def test_epsilon_zero_is_greedy():
    rollout = make(num_envs=3, seed=4)
    policy = rollout.actor
    (chunk,) = collect(rollout, [30], epsilon=0.0)
    for t in range(30):
        np.testing.assert_array_equal(chunk.arrays["actions"][t], policy.greedy(chunk.arrays["obs"][t]))


def forced_state(action: int) -> dict[str, np.ndarray]:
    """A Q-network state dict with the output layer rewired to always prefer `action`."""
    state = policy_state(Q_POLICY)
    state["body.2.weight"][:] = 0.0
    state["body.2.bias"][:] = [1.0, 0.0] if action == 0 else [0.0, 1.0]
    return state


def test_load_state_changes_actions():
    rollout = make(num_envs=3, seed=6)
    try:
        before = rollout.collect(10, 0.0).arrays["actions"]
        seen = {}
        for action in (0, 1):
            rollout.load_policy(Q_POLICY, forced_state(action))
            seen[action] = rollout.collect(10, 0.0).arrays["actions"]
            assert np.all(seen[action] == action)
    finally:
        rollout.close()
    assert not (np.array_equal(before, seen[0]) and np.array_equal(before, seen[1]))


def test_same_seed_same_chunks():
    a = collect(make(num_envs=2, seed=9), [25], epsilon=0.5)[0]
    b = collect(make(num_envs=2, seed=9), [25], epsilon=0.5)[0]
    c = collect(make(num_envs=2, seed=10), [25], epsilon=0.5)[0]
    for name in a.arrays:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name])
    assert not np.array_equal(a.arrays["obs"], c.arrays["obs"])


def test_sampling_mode_records_behaviour_log_probs():
    """Sampling collectors draw from softmax(logits) and keep log pi(a|s) of the drawn action for the learner."""
    rollout = Rollout(EnvConfig(id=CARTPOLE), 4, CARTPOLE_SPACES, SAMPLING, seed=2)
    policy = manifest(CARTPOLE_SPACES, "categorical", (16,))
    rollout.load_policy(policy, policy_state(policy))
    try:
        chunk = rollout.collect(50, epsilon=0.0)
    finally:
        rollout.close()
    arrays = chunk.arrays
    assert rollout.actor is not None
    logits = rollout.actor.forward(arrays["obs"].reshape(-1, 4)).astype(np.float64)
    logp_all = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = logp_all[np.arange(len(logits)), arrays["actions"].reshape(-1)]
    np.testing.assert_allclose(arrays["logp"].reshape(-1), expected, rtol=1e-5, atol=1e-6)
    assert set(np.unique(arrays["actions"])) == {0, 1}  # a stochastic policy, not argmax


def test_new_policy_takes_over_mid_chunk_and_the_chunk_reports_the_oldest():
    rollout = make(num_envs=2, seed=7)
    steps = {"n": 0}

    def refresh() -> None:
        steps["n"] += 1
        if steps["n"] == 6:
            rollout.load_policy(Q_POLICY, forced_state(1), version=5)

    try:
        chunk = rollout.collect(12, 0.0, refresh=refresh)
    finally:
        rollout.close()
    assert chunk.policy_version == 0 and rollout.version == 5
    assert np.all(chunk.arrays["actions"][5:] == 1)  # from the sixth step on, the new policy acts


def test_n_episode_mode_cuts_the_chunk_after_that_many_episodes():
    rollout = make(CARTPOLE5, num_envs=3, seed=0)
    try:
        chunk = rollout.collect(100, 1.0, episodes_target=4)
    finally:
        rollout.close()
    # every episode lasts exactly 5 steps, in all 3 envs at once: after 10 steps 6 episodes have finished
    assert chunk.arrays["rewards"].shape == (10, 3)
    assert chunk.ends == [12, 13, 14, 27, 28, 29] and chunk.fresh_columns == [0, 1, 2]


def test_before_the_first_policy_actions_are_uniform_and_sampling_waits():
    rollout = Rollout(EnvConfig(id=CARTPOLE), 4, CARTPOLE_SPACES, EPSILON_GREEDY, seed=1)
    try:
        actions = rollout.collect(200, epsilon=0.0).arrays["actions"]
    finally:
        rollout.close()
    assert abs(actions.mean() - 0.5) < 0.05
    sampler = Rollout(EnvConfig(id=CARTPOLE), 2, CARTPOLE_SPACES, SAMPLING, seed=1)
    try:
        with pytest.raises(RuntimeError, match="before the first policy"):
            sampler.collect(5)
    finally:
        sampler.close()


def test_a_policy_for_other_spaces_or_another_head_is_refused():
    rollout = make()
    try:
        with pytest.raises(PolicyError, match="this run needs"):
            rollout.load_policy(manifest(CARTPOLE_SPACES, "categorical"), policy_state(Q_POLICY))
        other = manifest(PENDULUM, "q_values")
        with pytest.raises(PolicyError, match="this run needs"):
            rollout.load_policy(other, policy_state(Q_POLICY))
    finally:
        rollout.close()


def test_an_env_with_other_spaces_than_planned_is_refused():
    with pytest.raises(ValueError, match="planned the run for"):
        Rollout(EnvConfig(id="Pendulum-v1"), 1, CARTPOLE_SPACES, EPSILON_GREEDY, seed=0)


def test_continuous_actions_are_stored_as_drawn_and_applied_within_bounds():
    gaussian = manifest(PENDULUM, "gaussian", (8,))
    rollout = Rollout(EnvConfig(id="Pendulum-v1"), 2, PENDULUM, Behaviour(head="gaussian", sample=True), seed=0)
    state = policy_state(gaussian)
    state["log_std"][:] = 1.0  # std e: many draws beyond the [-2, 2] bounds
    rollout.load_policy(gaussian, state)
    try:
        chunk = rollout.collect(100)
    finally:
        rollout.close()
    arrays = chunk.arrays
    assert arrays["actions"].dtype == np.float32 and arrays["actions"].shape == (100, 2, 1)
    assert np.abs(arrays["actions"]).max() > 2.0 and arrays["logp"].shape == (100, 2)
    # Pendulum's reward is -(theta^2 + 0.1 thetadot^2 + 0.001 u^2) with u clipped to [-2, 2]: never below -16.3
    assert arrays["rewards"].min() >= -16.3


def test_a_frame_stacked_image_run_stores_each_frame_once() -> None:
    """Compact chunks whose frame columns cost about one frame per env step (the flat layout: 2k frames), rebuilt
    exactly into the flat chunk of the same seeded run (episodes of up to 40 steps: ends cost a frame each)."""
    from rlfleet.shared.payloads.framestack import flat_columns
    from tests.support.frames import twin_rollouts

    compact, flat = twin_rollouts(4, num_envs=4, seed=3, max_steps=40)
    frame_bytes = 6 * 7
    try:
        for _ in range(3):
            a, b = compact.collect(64, random=True), flat.collect(64, random=True)
            assert set(a.arrays) == {"frame", "history", "tail_frame", "final_frame", "actions", "rewards",
                                     "terminated", "truncated", "valid"}
            stored = sum(a.arrays[name].nbytes for name in ("frame", "history", "tail_frame", "final_frame"))
            assert stored / a.env_steps <= 1.2 * frame_bytes
            assert (b.arrays["obs"].nbytes + b.arrays["next_obs"].nbytes) / b.env_steps == 8 * frame_bytes
            for name, value in flat_columns(a.arrays).items():
                np.testing.assert_array_equal(value, b.arrays[name], err_msg=name)
    finally:
        compact.close()
        flat.close()


def test_an_n_episode_chunk_cut_short_keeps_its_per_env_columns() -> None:
    from rlfleet.shared.payloads.framestack import flat_columns
    from tests.support.frames import twin_rollouts

    """Per-env columns keep one entry per env when an n_episode chunk stops before its step count (here after
    at most 4 of 50 steps: fewer steps than envs)."""
    compact, flat = twin_rollouts(3, num_envs=6, seed=1, max_steps=4)
    try:
        a, b = compact.collect(50, episodes_target=1, random=True), flat.collect(50, episodes_target=1, random=True)
    finally:
        compact.close()
        flat.close()
    assert a.env_steps <= 4 * 6
    compact.schema.check(a.arrays, num_envs=6)
    for name, value in flat_columns(a.arrays).items():
        np.testing.assert_array_equal(value, b.arrays[name], err_msg=name)


class ZeroPaddedStacks(gym.vector.VectorWrapper):
    """Stacks whose older frames are blanked on every step: not a plain frame stack (as a vector backend with its
    own stacking, or a wrapper stacking differently, could be)."""

    def step(self, actions):  # type: ignore[no-untyped-def]
        obs, *rest = self.env.step(actions)
        out = obs.copy()
        out[:, :-1] = 0
        return (out, *rest)


def test_stacks_that_do_not_continue_one_another_stop_the_collector_naming_the_wrapper() -> None:
    from rlfleet.collector_worker.rollout import StackMismatch
    from tests.support.frames import twin_rollouts

    compact, flat = twin_rollouts(4, num_envs=2, seed=1)
    flat.close()
    compact.env = ZeroPaddedStacks(compact.env)
    try:
        with pytest.raises(StackMismatch, match=r"env.wrappers: frame_stack \(frames: 4\): env 0's observation after "
                                                r"step 0 does not continue the stack"):
            compact.collect(8, random=True)
    finally:
        compact.close()
