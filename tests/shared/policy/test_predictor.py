"""load_policy(...).predict: one observation or a batch, Dict observations as the env gives them, env actions out;
run directories resolve to their best policy; files that are not policies are refused naming what they are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save as st_save

from rlfleet.shared.config.base import CoreConfig
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.files import policy_bytes
from rlfleet.shared.policy.manifest import MANIFEST_KEY, PolicyManifest
from rlfleet.shared.policy.predictor import PolicyFileError, load_policy
from rlfleet.shared.storage.layout import BEST_POLICY, RunLayout, policy_path
from tests.support.policies import CARTPOLE, manifest, policy_state

BOX = Spaces(obs=ObsSpace(shape=(3,), dtype="float32"), action=BoxActions(low=(-2.0, 0.0), high=(2.0, 0.5)))
IMAGE = Spaces(obs=ObsSpace(shape=(6, 6, 1), dtype="uint8"), action=DiscreteActions(n=3))


def write_policy(path: Path, m: PolicyManifest, seed: int = 0) -> Path:
    import torch

    state = {k: torch.from_numpy(v) for k, v in policy_state(m, seed).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(policy_bytes(state, m))
    return path


def test_one_observation_gives_one_env_action_and_a_batch_one_per_row(tmp_path: Path) -> None:
    m = manifest(BOX, "tanh_gaussian", (8,))
    policy = load_policy(write_policy(tmp_path / "p.safetensors", m))
    obs = np.random.default_rng(0).normal(size=(5, 3))  # float64, as a user's own code may hold it
    batch = policy.predict(obs)
    expected = build_actor(m, policy_state(m)).greedy(obs.astype(np.float32))
    np.testing.assert_array_equal(batch, expected)
    assert batch.dtype == np.float32 and batch.shape == (5, 2)
    assert ((batch >= [-2.0, 0.0]) & (batch <= [2.0, 0.5])).all()  # rescaled into the Box, as the env takes it
    single = policy.predict(list(obs[2]))
    np.testing.assert_array_equal(single, expected[2])


def test_a_discrete_policy_returns_an_integer_the_env_steps_with(tmp_path: Path) -> None:
    import gymnasium as gym

    policy = load_policy(write_policy(tmp_path / "p.safetensors", manifest(CARTPOLE, "categorical")))
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    action = policy.predict(obs)
    assert action.shape == () and np.issubdtype(action.dtype, np.integer)
    assert env.action_space.contains(action)
    env.step(action)


def test_sampling_draws_from_the_distribution_and_a_seed_repeats_it(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "p.safetensors", manifest(CARTPOLE, "categorical"))
    obs = np.zeros((200, 4), np.float32)
    drawn = load_policy(path, seed=1).predict(obs, deterministic=False)
    assert set(drawn.tolist()) == {0, 1}  # an untrained policy is near uniform: both actions come up
    np.testing.assert_array_equal(drawn, load_policy(path, seed=1).predict(obs, deterministic=False))


def test_a_dict_observation_is_flattened_as_the_env_builder_flattens_it(tmp_path: Path) -> None:
    import gymnasium as gym

    space = gym.spaces.Dict({"velocity": gym.spaces.Box(-1, 1, (2,)), "position": gym.spaces.Box(-1, 1, (2, 2))})
    m = manifest(Spaces(obs=ObsSpace(shape=(6,), dtype="float32"), action=DiscreteActions(n=3)), "q_values")
    policy = load_policy(write_policy(tmp_path / "p.safetensors", m))
    actor = build_actor(m, policy_state(m))
    space.seed(0)
    samples = [space.sample() for _ in range(20)]
    flat = np.stack([gym.spaces.flatten(space, s) for s in samples])  # what FlattenObservation feeds the actor
    expected = actor.greedy(flat)
    reordered = [{"velocity": s["velocity"], "position": s["position"]} for s in samples]  # insertion order differs
    assert [policy.predict(s) for s in reordered] == expected.tolist()
    batched = {key: np.stack([s[key] for s in samples]) for key in ("velocity", "position")}
    np.testing.assert_array_equal(policy.predict(batched), expected)


def test_an_observation_that_does_not_fit_names_the_expected_shape_and_dtype(tmp_path: Path) -> None:
    policy = load_policy(write_policy(tmp_path / "p.safetensors", manifest(CARTPOLE, "q_values")))
    with pytest.raises(ValueError, match=r"observation of shape \[5\]: this policy expects float32 of shape \[4\], "
                                         r"or a batch of them of shape \[N, 4\]"):
        policy.predict(np.zeros(5))
    with pytest.raises(ValueError, match=r"'a': float64\[3\].*does not fit this policy's 4 values \(shape \[4\], "
                                         r"float32\)"):
        policy.predict({"a": np.zeros(3), "b": np.zeros((2, 2))})
    with pytest.raises(ValueError, match=r"dtype <U1: this policy expects numbers \(float32\) of shape \[4\]"):
        policy.predict(np.array(["a", "b", "c", "d"]))


def test_an_image_policy_takes_frames_as_the_env_gives_them_and_refuses_scaled_ones(tmp_path: Path) -> None:
    policy = load_policy(write_policy(tmp_path / "p.safetensors", manifest(IMAGE, "categorical")))
    frames = np.random.default_rng(0).integers(0, 256, (4, 6, 6, 1)).astype(np.uint8)
    assert policy.predict(frames).shape == (4,)
    assert policy.predict(frames[0].astype(np.int64)) == policy.predict(frames)[0]  # integers in 0..255 are frames
    with pytest.raises(ValueError, match=r"dtype float32: this policy expects uint8 of shape \[6, 6, 1\] \(an image "
                                         r"as the env gives it, not scaled\)"):
        policy.predict(frames.astype(np.float32) / 255)


def run_dir(tmp_path: Path) -> RunLayout:
    layout = RunLayout(tmp_path / "data", "cartpole__s0__20260101-000000")
    layout.run_dir.mkdir(parents=True)
    return layout


def test_a_run_directory_gives_its_best_policy(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    m = manifest(CARTPOLE, "categorical")
    write_policy(layout.store_root / policy_path(7), m, seed=7)
    best = write_policy(layout.best / BEST_POLICY, m, seed=3)
    assert load_policy(layout.run_dir).source == best
    assert load_policy(layout.best).source == best  # the best/ directory itself
    assert load_policy(str(layout.run_dir)).source == best


def test_a_run_not_yet_evaluated_gives_its_latest_policy(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"holds no policy: neither .*best/policy.safetensors"):
        load_policy(layout.run_dir)
    m = manifest(CARTPOLE, "categorical")
    for version in (9, 10, 2):
        write_policy(layout.store_root / policy_path(version), m)
    assert load_policy(layout.run_dir).source == layout.store_root / policy_path(10)


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"no policy file or run directory {tmp_path / 'nope'}"):
        load_policy(tmp_path / "nope")


def manifest_json(**changes: object) -> str:
    raw = json.loads(manifest(CARTPOLE, "categorical").to_json())
    return json.dumps({**raw, **changes})


@pytest.mark.parametrize(("content", "what"), [
    (b"PK\x03\x04" + bytes(100), r"is a zip archive \(a PyTorch \.pt or Stable-Baselines3 \.zip save\?\), not an "
                                  r"rlfleet policy: rlfleet's policies are \.safetensors files"),
    (b"\x80\x04\x95" + bytes(100), "is a Python pickle"),
    (b"\x01\x02", "is a file of 2 bytes"),
    (st_save({"w": np.zeros(2, np.float32)}), r"is a safetensors file, .*has no 'rlfleet.manifest' metadata"),
    (st_save({"w": np.zeros(2, np.float32)}, metadata={MANIFEST_KEY: manifest_json(version=2)}),
     r"is a safetensors file, .*policy manifest version 2; this rlfleet reads version 1"),
], ids=["torch-or-sb3", "pickle", "truncated", "no-manifest", "other-version"])
def test_a_file_that_is_not_a_policy_of_this_rlfleet_is_named_with_what_it_is(tmp_path: Path, content: bytes,
                                                                               what: str) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(content)
    with pytest.raises(PolicyFileError, match=f"^{re.escape(str(path))} {what}"):
        load_policy(path)


def test_a_truncated_policy_file_is_corrupt(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "p.safetensors", manifest(CARTPOLE, "categorical"))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(PolicyFileError, match=f"{path} is a safetensors file, .*unreadable policy weights"):
        load_policy(path)


def test_weights_that_do_not_fit_the_manifest_are_a_corrupt_policy(tmp_path: Path) -> None:
    m = manifest(CARTPOLE, "categorical", (16,))
    state = {k: v for k, v in policy_state(m).items() if k != "body.2.bias"}
    path = tmp_path / "p.safetensors"
    path.write_bytes(st_save(state, metadata={MANIFEST_KEY: m.to_json()}))
    with pytest.raises(PolicyFileError, match=f"{path} is a corrupt rlfleet policy: policy has keys"):
        load_policy(path)


def test_a_recurrent_policy_remembers_between_calls_until_reset(tmp_path: Path) -> None:
    """One observation at a time carries the core's state as the actor does over a sequence; reset() forgets it,
    for every env or one of a batch."""
    m = manifest(CARTPOLE, "categorical", (8,)).model_copy(update={"core": CoreConfig(kind="gru", hidden=6)})
    policy = load_policy(write_policy(tmp_path / "p.safetensors", m))
    obs = np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32)
    actor = build_actor(m, policy_state(m))
    outputs = [actor.forward(o[None])[0] for o in obs]  # the actor's state runs through the sequence
    assert not np.allclose(outputs[0], outputs[3])
    for o, out in zip(obs, outputs, strict=True):
        assert policy.predict(o) == int(np.argmax(out))
    policy.reset()
    actor.reset()
    assert policy.predict(obs[0]) == int(np.argmax(actor.forward(obs[0][None])[0]))
    both = policy.predict(obs[:2])
    policy.reset(env_index=1)  # env 1's episode starts again; env 0 goes on
    fresh = build_actor(m, policy_state(m))
    second = policy.predict(obs[2:4])
    assert second[1] == int(np.argmax(fresh.forward(obs[3][None])[0])) and len(both) == 2
    with pytest.raises(IndexError, match="env_index 2: the last batch had 2"):
        policy.reset(env_index=2)
