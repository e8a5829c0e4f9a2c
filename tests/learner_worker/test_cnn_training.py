"""Image-observation envs train with the CNN encoder, a plain image and a Dict holding one (a multi-input encoder):
real collector rollout, real learner, greedy check."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.evaluator.episodes import evaluate
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.plan import chunk_schema
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.gymspaces import describe
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.pixelgrid import PixelGrid

torch.set_num_threads(1)
PIXEL_ID = "RlfleetTest/PixelGrid-v0"
if PIXEL_ID not in gym.registry:
    gym.register(PIXEL_ID, entry_point=PixelGrid)


BEHAVIOUR = Behaviour(head="categorical", sample=True)


def greedy_score_after_training(env: EnvConfig, spaces: Spaces, ppo: PPO, updates: int) -> tuple[float, int]:
    """Collect 8 envs x 32 steps through a real collector rollout and update, up to `updates` times, every chunk
    checked against the run's schema and kept in uint8; every 20 updates the greedy policy plays 20 episodes. Returns
    (the last greedy mean return, updates taken), stopping once it reaches 0.8."""
    rollout = Rollout(env, 8, spaces, BEHAVIOUR, seed=0)
    schema = chunk_schema(spaces, BEHAVIOUR, env)
    score = -1.0
    try:
        for update in range(1, updates + 1):
            rollout.load_policy(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()}, version=update)
            chunk = rollout.collect(32)
            assert chunk.arrays["obs"].dtype == np.uint8  # pixels (and integer entries) stay bytes in the payload
            schema.check(chunk.arrays, num_envs=8)
            schema.check_values(chunk.arrays, 8 * 32)
            ppo.update([chunk.arrays])
            if update % 20 == 0:
                actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
                returns, _ = evaluate(actor.greedy, env, num_envs=10, episodes=20, seed=10_000 + update)
                score = float(np.mean(returns))
                if score >= 0.8:
                    break
    finally:
        rollout.close()
    return score, update


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ppo_with_the_cnn_encoder_learns_the_pixel_grid() -> None:
    env = EnvConfig(id=PIXEL_ID)
    probe = gym.make(PIXEL_ID)
    spaces = describe(probe)
    probe.close()
    assert spaces.obs.image and spaces.obs.dtype == "uint8"
    cfg = PPOParams(net=NetConfig(hidden=(64,), activation="relu"), learning_rate=1e-3, gamma=0.95, gae_lambda=0.9,
                    epochs=4, minibatch_size=128, entropy_coef=0.01)
    ppo = PPO(spaces, cfg, BEHAVIOUR, seed=0)
    assert ppo.manifest().encoder.kind == "cnn"
    score, updates = greedy_score_after_training(env, spaces, ppo, 120)
    assert score >= 0.8, f"greedy mean return {score:.2f} after {updates} updates of 256 steps"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ppo_with_a_multi_input_encoder_learns_where_the_agent_is_seen_and_the_goal_is_told() -> None:
    """DictPixelGrid: the agent is only in the image, the goal (new each episode) only in a MultiDiscrete entry,
    so the greedy policy reaches 0.8 only by reading both through one network."""
    env = EnvConfig(id="tests.support.pixelgrid:DictPixelGrid")
    probe = make_env(env)
    spaces = describe(probe)
    probe.close()
    assert [part.kind for part in spaces.obs.parts or ()] == ["image", "multidiscrete"]
    cfg = PPOParams(net=NetConfig(hidden=(64,), activation="relu", encoder={"kind": "cnn", "channels": [16]}),
                    learning_rate=1e-3, gamma=0.95, gae_lambda=0.9, epochs=4, minibatch_size=128, entropy_coef=0.01)
    score, updates = greedy_score_after_training(env, spaces, PPO(spaces, cfg, BEHAVIOUR, seed=0), 200)
    assert score >= 0.8, f"greedy mean return {score:.2f} after {updates} updates of 256 steps"
