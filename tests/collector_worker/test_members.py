"""A collector's evaluation of a member: the perturbed policy played greedily on the generation's seeds, exactly
as playing it by hand would, capped at max_steps."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.collector_worker.members import MemberEvaluator, _evaluate_one
from rlfleet.shared.algorithms.base import sampled_head
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.policy.actors import NumpyActor
from rlfleet.shared.policy.files import load_policy, save_policy
from rlfleet.shared.policy.flat_params import flatten, policy_shapes, unflatten
from rlfleet.shared.policy.manifest import PolicyManifest, default_encoder
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.policy.noise_table import noise_table
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import MemberClaim, MemberTask, Perturbation
from rlfleet.shared.worker.client import CoordinatorRejected
from tests.support.fake_coordinator import FakeCoordinator, error, make_session, reply
from tests.support.policies import CARTPOLE

PERTURBATION = Perturbation(noise_seed=11, noise_size=8192, sigma=0.5, episodes=3)


def _member(tmp_path: Path, sign: int = 1, **perturbation: object) -> tuple[MemberTask, LocalStore]:
    torch.manual_seed(0)
    manifest = PolicyManifest(spaces=CARTPOLE, encoder=default_encoder(CARTPOLE.obs), net=NetConfig(hidden=(8,)),
                              head=sampled_head(CARTPOLE))
    store = LocalStore(tmp_path / "store")
    ref = save_policy(store, 1, PolicyNet(manifest).state_dict(), manifest)
    return MemberTask(generation=1, member=0, policy=ref, perturbation=PERTURBATION.model_copy(update=perturbation),
                      noise_index=123, sign=sign, seed=5000), store


def _by_hand(member: MemberTask, store: LocalStore) -> list[float]:
    """Each episode played alone with the perturbed weights, one env per seed."""
    manifest, state = load_policy(store, member.policy)
    shapes = policy_shapes(manifest)
    theta = flatten(state, shapes)
    p = member.perturbation
    actor = NumpyActor(manifest, unflatten(theta + member.sign * p.sigma * noise_table(p.noise_seed, p.noise_size)
                                           .get(member.noise_index, theta.size), shapes))
    returns = []
    for i in range(p.episodes):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=member.seed + i)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(actor.greedy(obs[None])[0]))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def test_a_member_plays_its_perturbed_policy_on_the_generations_seeds(tmp_path: Path) -> None:
    member, store = _member(tmp_path)
    evaluator = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    try:
        outcome = evaluator.evaluate(member)
        expected = _by_hand(member, store)
        assert outcome.episodes == 3 and outcome.mean_return == np.mean(expected)
        assert outcome.env_steps == sum(expected) and outcome.mean_length == np.mean(expected)
        assert evaluator.evaluate(member) == outcome  # envs kept across members: still the same seeds
        other = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)  # another collector
        try:
            assert other.evaluate(member) == outcome
        finally:
            other.close()
        opposite = evaluator.evaluate(member.model_copy(update={"sign": -1}))
        assert opposite.mean_return == np.mean(_by_hand(member.model_copy(update={"sign": -1}), store))
    finally:
        evaluator.close()


def test_max_steps_caps_the_members_episodes_together(tmp_path: Path) -> None:
    member, store = _member(tmp_path, max_steps=20)
    evaluator = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    try:
        outcome = evaluator.evaluate(member)
    finally:
        evaluator.close()
    assert 20 <= outcome.env_steps < 20 + 3  # the step that crosses the cap finishes its round of envs
    assert outcome.episodes <= 3


@pytest.mark.parametrize(("code", "dropped"), [("member_not_held", True), ("conflict", False)])
def test_a_result_refused_as_not_held_is_dropped_and_the_collector_goes_on(tmp_path: Path, code: str,
                                                                          dropped: bool) -> None:
    """Too slow for the member's lease (another collector took it over) or for two closes: the coordinator
    refuses the result, and the collector drops it instead of exiting. Any other refusal still ends it."""
    member, store = _member(tmp_path)
    fake = FakeCoordinator()
    fake.handlers["member-claim"] = lambda _: reply(MemberClaim(member=member, directive=fake.directive()))
    fake.handlers["member-results"] = lambda _: error(409, code, "refused")
    session = make_session(fake, "collector")
    session.register()
    evaluator = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    try:
        if dropped:
            _evaluate_one(session, evaluator)
        else:
            with pytest.raises(CoordinatorRejected):
                _evaluate_one(session, evaluator)
    finally:
        evaluator.close()
    assert len(fake.of("member-results")) == 1  # refused for good: never retried
