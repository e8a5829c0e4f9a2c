"""A trained run's policy used outside rlfleet: `load_policy(run).predict(obs)`, one observation at a time in a
plain gymnasium loop, plays the env as well as the run's held-out test (`rlfleet test`) scored it, for a flat, a
Dict, an image env and a Dict holding an image.

The policies are produced here, as a learner would publish them: a hand-made CartPole controller (also playing
CartPole observed as a Dict) and CNNs trained on PixelGrid's optimal moves (seen whole, or the agent in an image and
the goal as coordinates); each is written as a run's best
policy next to the run's config, exactly where `rlfleet up` leaves them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.policy.files import policy_bytes
from rlfleet.shared.policy.manifest import PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.policy.predictor import load_policy
from rlfleet.shared.storage.layout import BEST_POLICY, RunLayout
from tests.support.dict_cartpole import DictCartPole
from tests.support.pixelgrid import SIZE, DictPixelGrid, PixelGrid
from tests.support.policies import cartpole_expert

TEST_EPISODES = 10
PLAY_EPISODES = 10


def make_run(data_dir: Path, env: dict[str, Any], manifest: PolicyManifest, state: dict[str, torch.Tensor]) -> Path:
    config = RunConfig.model_validate({"name": "used", "env": env})
    layout = RunLayout(data_dir, "used__s0__20260101-000000")
    layout.best.mkdir(parents=True)
    layout.config_file.write_text(dump_run_config(config))
    (layout.best / BEST_POLICY).write_bytes(policy_bytes(state, manifest))
    return layout.run_dir


def held_out_mean(run_dir: Path) -> float:
    """The run's held-out test, as `rlfleet test RUN_DIR` plays and records it."""
    result = CliRunner().invoke(app, ["test", str(run_dir), "--episodes", str(TEST_EPISODES), "--num-envs", "2"])
    assert result.exit_code == 0, result.output
    return float(json.loads((run_dir / "test.json").read_text())["mean"])


def play(run_dir: Path, env: gym.Env, episodes: int = PLAY_EPISODES) -> float:
    """A user's loop: one observation at a time, straight from the env, the action straight into it."""
    policy = load_policy(run_dir)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        policy.reset()
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.predict(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


@pytest.mark.parametrize(("env_id", "make"), [
    ("CartPole-v1", lambda: gym.make("CartPole-v1")),
    ("tests.support.dict_cartpole:DictCartPole", lambda: gym.wrappers.TimeLimit(DictCartPole(), 500)),
], ids=["flat", "dict"])
def test_a_cartpole_policy_plays_its_env_one_observation_at_a_time(tmp_path: Path, env_id: str, make: Any) -> None:
    section = {"id": env_id, "max_episode_steps": 500, "solve_threshold": 475}
    manifest, state = cartpole_expert()
    run_dir = make_run(tmp_path, section, manifest, state)
    tested = held_out_mean(run_dir)
    assert tested == 500.0  # the controller balances to the time limit
    assert play(run_dir, make()) == tested


def pixelgrid_policy(manifest: PolicyManifest) -> dict[str, torch.Tensor]:
    """A CNN policy taught PixelGrid's optimal move from every start: down to the goal's row, then right."""
    torch.manual_seed(0)
    env = PixelGrid()
    frames, moves = [], []
    for row in range(SIZE):
        for col in range(SIZE):
            if (row, col) == (SIZE - 1, SIZE - 1):
                continue
            env.pos = np.array([row, col])
            frames.append(env._obs())
            moves.append(1 if row < SIZE - 1 else 3)
    obs, target = torch.from_numpy(np.stack(frames)), torch.tensor(moves)
    net = PolicyNet(manifest)
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(200):
        optimiser.zero_grad()
        F.cross_entropy(net(obs), target).backward()
        optimiser.step()
    assert (net(obs).argmax(dim=1) == target).all()
    return net.state_dict()


def test_an_image_policy_plays_pixelgrid_one_frame_at_a_time(tmp_path: Path) -> None:
    section = {"id": "tests.support.pixelgrid:PixelGrid", "solve_threshold": 0.8}
    spaces = spaces_of(RunConfig.model_validate({"env": section}).env)
    manifest = PolicyManifest.of(spaces, NetConfig(hidden=(32,), encoder={"kind": "cnn", "channels": [8]}),
                                 "categorical")
    run_dir = make_run(tmp_path, section, manifest, pixelgrid_policy(manifest))
    tested = held_out_mean(run_dir)
    assert tested >= 0.86  # every start reaches the goal by a shortest path (at most 8 steps: 1 - 0.02 * 7)
    played = play(run_dir, PixelGrid(), episodes=50)
    assert played >= 0.86 and abs(played - tested) < 0.05  # the same policy, on other starts


def dict_pixelgrid_policy(manifest: PolicyManifest) -> dict[str, torch.Tensor]:
    """A multi-input policy taught DictPixelGrid's optimal move for every goal and start: rows first, then columns."""
    torch.manual_seed(0)
    env = DictPixelGrid()
    observations, moves = [], []
    for goal in np.ndindex(SIZE, SIZE):
        for pos in np.ndindex(SIZE, SIZE):
            if pos == goal:
                continue
            env.goal, env.pos = np.array(goal), np.array(pos)
            observations.append(env._obs())
            moves.append(1 if pos[0] < goal[0] else 0 if pos[0] > goal[0] else 3 if pos[1] < goal[1] else 2)
    flat = np.stack([np.concatenate([o["frame"].ravel(), o["goal"]]) for o in observations])  # the builder's order
    obs, target = torch.from_numpy(flat), torch.tensor(moves)
    net = PolicyNet(manifest)
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(300):
        optimiser.zero_grad()
        F.cross_entropy(net(obs), target).backward()
        optimiser.step()
    assert (net(obs).argmax(dim=1) == target).float().mean() > 0.99
    return net.state_dict()


def test_a_multi_input_policy_plays_dict_pixelgrid_one_dict_at_a_time(tmp_path: Path) -> None:
    section = {"id": "tests.support.pixelgrid:DictPixelGrid", "solve_threshold": 0.8}
    spaces = spaces_of(RunConfig.model_validate({"env": section}).env)
    manifest = PolicyManifest.of(spaces, NetConfig(hidden=(64,)), "categorical")
    assert manifest.encoder.kind == "cnn"  # chosen for the image entry
    run_dir = make_run(tmp_path, section, manifest, dict_pixelgrid_policy(manifest))
    tested = held_out_mean(run_dir)
    assert tested >= 0.86
    played = play(run_dir, DictPixelGrid(), episodes=50)
    assert played >= 0.86 and abs(played - tested) < 0.05
