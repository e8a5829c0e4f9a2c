"""The supervised trainer: it fits a regression and a classification target from dataset columns, reports
held-out scores, saves a self-describing model, and refuses columns it cannot learn."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from safetensors import safe_open

from rlfleet.learner_worker.algorithms.supervised import MODEL_KEY, Supervised
from rlfleet.shared.algorithms.base import sampled_head
from rlfleet.shared.algorithms.supervised import SupervisedParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import roundtrip
from tests.support.policies import CARTPOLE, PENDULUM

torch.set_num_threads(1)


def _model(spaces: Spaces = CARTPOLE, **params: object) -> Supervised:
    cfg = SupervisedParams(dataset="demo", net=NetConfig(hidden=(64,), activation="relu"), learning_rate=3e-3,
                           **params)  # type: ignore[arg-type]
    return Supervised(spaces, cfg, Behaviour(head=sampled_head(spaces), sample=False), seed=0)


def _steps(n: int, seed: int) -> dict[str, np.ndarray]:
    """Linear 'dynamics': next_obs = A obs + B onehot(action); terminated when |obs[2]| > 1."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, 4)).astype(np.float32)
    actions = rng.integers(0, 2, n)
    a = np.array([[1, 0.1, 0, 0], [0, 1, 0.2, 0], [0, 0, 1, 0.1], [0, 0, 0.3, 1]], np.float32)
    push = np.where(actions[:, None] == 1, 0.5, -0.5).astype(np.float32) * np.array([0, 1, 0, 1], np.float32)
    return {"obs": obs, "actions": actions.astype(np.int64), "next_obs": obs @ a.T + push,
            "rewards": np.ones(n, np.float32), "terminated": np.abs(obs[:, 2]) > 1}


def test_a_dynamics_model_is_regressed_to_a_high_r2() -> None:
    model = _model(inputs=("obs", "actions"), target="next_obs", loss="mse")
    assert (model.in_dim, model.out_dim) == (4 + 2, 4)
    valid = _steps(1000, seed=99)
    before = model.evaluate(valid)
    for step in range(400):
        losses = model.update(_steps(256, seed=step))
    after = model.evaluate(valid)
    assert set(after) == {"valid_loss", "valid_r2"} and set(losses) == {"loss"}
    assert after["valid_r2"] > 0.97 and after["valid_loss"] < 0.1 * before["valid_loss"]


def test_a_class_target_is_classified() -> None:
    model = _model(inputs=("obs",), target="terminated", loss="cross_entropy")
    assert model.out_dim == 2
    for step in range(300):
        model.update(_steps(256, seed=step))
    scores = model.evaluate(_steps(1000, seed=99))
    assert scores["valid_accuracy"] > 0.95 and "valid_r2" not in scores


def test_box_actions_are_features_as_they_are() -> None:
    model = _model(PENDULUM, inputs=("obs", "actions"), target="rewards", loss="mse")
    assert model.in_dim == 3 + 1
    batch = {"obs": np.zeros((5, 3), np.float32), "actions": np.ones((5, 1), np.float32),
             "rewards": np.arange(5, dtype=np.float32)}
    assert np.isfinite(model.update(batch)["loss"])


def test_the_model_file_says_what_it_maps(tmp_path: object) -> None:
    model = _model(inputs=("obs", "actions"), target="next_obs")
    path = f"{tmp_path}/model.safetensors"
    with open(path, "wb") as f:
        f.write(model.model_file())
    with safe_open(path, "pt") as f:
        about = json.loads(f.metadata()[MODEL_KEY])
        weights = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
    assert about["inputs"] == ["obs", "actions"] and about["target"] == "next_obs" and about["output_dim"] == 4
    restored = _model(inputs=("obs", "actions"), target="next_obs")
    restored.model.load_state_dict(weights)
    batch = _steps(8, seed=1)
    assert restored.evaluate(batch) == model.evaluate(batch)


def test_a_resumed_trainer_steps_like_the_uninterrupted_one() -> None:
    first = _model(inputs=("obs", "actions"), target="next_obs")
    first.update(_steps(64, seed=0))
    resumed = _model(inputs=("obs", "actions"), target="next_obs")
    resumed.load(roundtrip(first.state()))
    assert first.update(_steps(64, seed=1)) == resumed.update(_steps(64, seed=1))


@pytest.mark.parametrize(("algo", "env", "message"), [
    ({"inputs": ["obs", "rewards"], "target": "rewards"}, "CartPole-v1", "also in algo.inputs"),
    ({"inputs": ["obs", "obs"], "target": "rewards"}, "CartPole-v1", "names a column twice"),
    ({"target": "rewards", "loss": "cross_entropy"}, "CartPole-v1", "must be one of"),
    ({"inputs": ["obs"], "target": "actions", "loss": "cross_entropy"}, "Pendulum-v1", "needs discrete actions"),
])
def test_columns_it_cannot_learn_are_refused_at_load(algo: dict, env: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        preflight(RunConfig.model_validate({"env": {"id": env},
                                            "algo": {"name": "supervised", "dataset": "demo", **algo}}))
