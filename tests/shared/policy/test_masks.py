"""Action masks: from a Dict observation's `action_mask` to spaces, numpy actors and the learners' losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.distributions import log_prob_entropy
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.envs.build import make_vector_env
from rlfleet.shared.envs.gymspaces import describe
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.actors import build_actor, random_actions
from rlfleet.shared.policy.nets import PolicyNet
from tests.support.policies import EPSILON_GREEDY, manifest, policy_state

torch.set_num_threads(1)
N = 5
MASKED = Spaces(obs=ObsSpace(shape=(N + 3,), dtype="float32"), action=DiscreteActions(n=N), action_mask_offset=0)


def masked_obs(rows: int, seed: int = 0) -> np.ndarray:
    """Observations whose first N entries are a mask allowing a random non-empty subset of actions."""
    rng = np.random.default_rng(seed)
    mask = rng.random((rows, N)) < 0.4
    mask[np.arange(rows), rng.integers(0, N, rows)] = True
    return np.concatenate([mask, rng.normal(size=(rows, 3))], axis=1).astype(np.float32)


def allowed(obs: np.ndarray, actions: np.ndarray) -> bool:
    return bool(obs[np.arange(len(obs)), actions].all())


@pytest.mark.parametrize("head", ["q_values", "categorical"])
def test_every_actor_decision_is_legal(head) -> None:  # type: ignore[no-untyped-def]
    m = manifest(MASKED, head, (16,))
    actor = build_actor(m, policy_state(m, seed=1))
    obs = masked_obs(2000)
    rng = np.random.default_rng(2)
    assert allowed(obs, actor.greedy(obs))
    assert allowed(obs, actor.act(obs, explore=True, rng=rng, epsilon=1.0).actions)  # epsilon: random legal moves
    assert allowed(obs, actor.act(obs, explore=True, rng=rng).actions)
    assert allowed(obs, random_actions(MASKED, head, len(obs), rng, obs).actions)
    unmasked = MASKED.model_copy(update={"action_mask_offset": None})
    plain = build_actor(manifest(unmasked, head, (16,)), policy_state(manifest(unmasked, head, (16,)), seed=1))
    assert not allowed(obs, plain.greedy(obs))  # the same network ignoring the mask does play illegal moves


def test_random_legal_actions_are_uniform_over_the_legal_ones() -> None:
    obs = np.zeros((30_000, N + 3), np.float32)
    obs[:, [1, 3, 4]] = 1.0
    acts = random_actions(MASKED, "q_values", len(obs), np.random.default_rng(0), obs).actions
    assert set(np.unique(acts)) == {1, 3, 4}
    assert np.allclose(np.bincount(acts, minlength=N)[[1, 3, 4]] / len(acts), 1 / 3, atol=0.01)


def test_the_learners_log_prob_is_the_masked_distribution_the_collector_drew_from() -> None:
    m = manifest(MASKED, "categorical", (8,))
    state = policy_state(m, seed=3)
    obs = masked_obs(512, seed=4)
    decision = build_actor(m, state).act(obs, explore=True, rng=np.random.default_rng(5))
    net = PolicyNet(m)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    x = torch.from_numpy(obs)
    with torch.no_grad():
        logp, entropy = log_prob_entropy("categorical", MASKED, net(x), None, torch.from_numpy(decision.actions), x)
        _, unmasked_entropy = log_prob_entropy("categorical", MASKED, net(x), None, torch.from_numpy(decision.actions))
    np.testing.assert_allclose(decision.logp, logp.numpy(), rtol=1e-4, atol=1e-4)
    assert torch.isfinite(entropy).all() and (entropy <= unmasked_entropy + 1e-6).all()
    single = obs[:, :N].sum(axis=1) == 1  # one legal move: certain, no entropy
    assert single.any() and torch.allclose(entropy[torch.from_numpy(single)], torch.tensor(0.0), atol=1e-6)


def test_dqn_bootstraps_over_the_next_states_legal_actions_only() -> None:
    cfg = DQNParams(net=NetConfig(hidden=(8,)), batch_size=4, double_q=False)
    dqn = DQN(MASKED, cfg, EPSILON_GREEDY, seed=0)
    boot = masked_obs(4, seed=6)
    boot[3, :N] = 0.0  # a finished game's last observation: nothing legal, and a zero discount
    batch = {"obs": masked_obs(4, seed=7), "actions": np.zeros(4, np.int64), "returns": np.zeros(4, np.float32),
             "boot_obs": boot, "discount": np.array([1.0, 1.0, 1.0, 0.0], np.float32)}
    with torch.no_grad():
        q_next = dqn.nets.target(torch.from_numpy(boot)).numpy()
    _, _, target = dqn.td_loss(batch)
    want = [q_next[i][boot[i, :N] > 0.5].max() for i in range(3)]
    np.testing.assert_allclose(target.numpy()[:3], want, rtol=1e-5)
    assert target[3].item() == 0.0  # finite: the all-illegal row bootstraps over every action, times 0
    assert not np.allclose(want, q_next[:3].max(axis=1))  # the unmasked max would differ here


def test_a_dict_observations_action_mask_becomes_the_spaces_mask() -> None:
    vec = make_vector_env(EnvConfig(id="rlfleet/ConnectFour-v0", solve_threshold=0.9), 2)
    try:
        spaces = describe(vec)
    finally:
        vec.close()
    assert spaces.action_mask_offset == 0 and spaces.action == DiscreteActions(n=7)
    assert spaces.obs.shape == (7 + 6 * 7 * 2,)


@pytest.mark.parametrize(("update", "message"), [
    ({"action": BoxActions(low=(-1.0,), high=(1.0,))}, "needs Discrete actions"),
    ({"action_mask_offset": 4}, "does not fit"),
    ({"obs": ObsSpace(shape=(8, 8, 3), dtype="uint8")}, "flat observation"),
])
def test_a_mask_the_spaces_cannot_hold_is_refused(update, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        Spaces.model_validate({**MASKED.model_dump(), **{k: v.model_dump() if hasattr(v, "model_dump") else v
                                                        for k, v in update.items()}})
