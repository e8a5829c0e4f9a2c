"""The policy's input encoding of observations that are not a Box: one-hot for Discrete and MultiDiscrete, 0/1 for
MultiBinary, as Stable-Baselines3 encodes them, the same in the numpy actors and the learner's torch networks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.preprocessing import preprocess_obs

from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.envs.gymspaces import RawObservation, describe
from rlfleet.shared.payloads.spaces import BoxPart, DiscreteActions, DiscretePart, ObsSpace, Spaces
from rlfleet.shared.policy.actors import NumpyActor
from rlfleet.shared.policy.manifest import ObsNorm, PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.policy.obs_encoding import ObsEncoder
from tests.support.userenv import AnySpace

SB3_SPACES = ["discrete", "multidiscrete", "multibinary", "nested", "masked"]
ALL_SPACES = [*SB3_SPACES, "discrete_from_3", "discrete_negative", "multidiscrete_2d", "tuple"]


def raw_env(space: str) -> RawObservation:
    return RawObservation(AnySpace(space))


def samples(space: gym.Space, n: int) -> list:
    space.seed(0)
    return [space.sample() for _ in range(n)]


def sb3_encoding(space: gym.Space, obs: object) -> np.ndarray:
    """Stable-Baselines3's preprocess_obs of one observation, a Dict's entries side by side in key order."""
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([sb3_encoding(sub, obs[key]) for key, sub in space.spaces.items()])  # type: ignore[index]
    if isinstance(space, gym.spaces.Tuple):
        return np.concatenate([sb3_encoding(sub, obs[i]) for i, sub in enumerate(space.spaces)])  # type: ignore[index]
    tensor = torch.as_tensor(np.asarray(obs))[None]
    return preprocess_obs(tensor, space, normalize_images=False).reshape(-1).numpy()


@pytest.mark.parametrize("name", SB3_SPACES)
def test_each_space_is_encoded_as_stable_baselines3_encodes_it(name: str) -> None:
    env = raw_env(name)
    encode = ObsEncoder(env.described, None)
    for obs in samples(env.env.observation_space, 20):
        raw = env.observation(obs)
        np.testing.assert_array_equal(encode(raw[None])[0], sb3_encoding(env.env.observation_space, obs))


def test_a_discrete_part_is_one_hot_from_its_start_and_stored_as_its_own_value() -> None:
    env = raw_env("discrete_from_3")  # values 3..6
    assert env.described == ObsSpace(shape=(1,), dtype="uint8", parts=(DiscretePart(n=4, start=3),))
    raw = env.observation(5)
    assert raw.tolist() == [5]
    assert ObsEncoder(env.described, None)(raw[None]).tolist() == [[0.0, 0.0, 1.0, 0.0]]


@pytest.mark.parametrize("name", ALL_SPACES)
def test_the_numpy_actor_and_the_torch_net_agree_on_the_same_weights(name: str) -> None:
    env = raw_env(name)
    spaces = describe(env)
    manifest = PolicyManifest.of(spaces, NetConfig(hidden=[16, 8]), "categorical")
    boxes = spaces.obs.norm_shape[0]
    if boxes:  # mixed observations: normalised box values, one-hot and binary ones left as they are
        norm = ObsNorm(mean=tuple(np.linspace(-1, 1, boxes)), var=tuple(np.linspace(0.5, 2, boxes)), clip=3.0)
        manifest = manifest.model_copy(update={"obs_norm": norm})
    torch.manual_seed(0)
    net = PolicyNet(manifest)
    actor = NumpyActor(manifest, {k: v.numpy() for k, v in net.state_dict().items()})
    obs = np.stack([env.observation(o) for o in samples(env.env.observation_space, 32)])
    with torch.no_grad():
        expected = net(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(actor.forward(obs), expected, rtol=1e-5, atol=1e-6)


def test_leading_axes_are_kept_by_the_torch_encoding() -> None:
    env = raw_env("nested")
    manifest = PolicyManifest.of(describe(env), NetConfig(hidden=[4]), "categorical")
    net = PolicyNet(manifest)
    obs = np.stack([env.observation(o) for o in samples(env.env.observation_space, 6)])
    with torch.no_grad():
        together = net(torch.from_numpy(obs.reshape(2, 3, -1)))
        alone = net(torch.from_numpy(obs))
    assert together.shape == (2, 3, 2)
    np.testing.assert_allclose(together.reshape(6, 2).numpy(), alone.numpy(), rtol=1e-6)


def test_only_box_values_are_normalised() -> None:
    obs = ObsSpace(shape=(3,), dtype="float32", parts=(DiscretePart(n=2), BoxPart(size=2)))
    encode = ObsEncoder(obs, ObsNorm(mean=(1.0, 2.0), var=(4.0, 1.0), clip=10.0))
    np.testing.assert_allclose(encode(np.array([[1.0, 3.0, 2.0]], np.float32)), [[0.0, 1.0, 1.0, 0.0]], atol=1e-6)


def test_rows_zeroed_as_padding_encode_inside_a_part_that_starts_above_zero() -> None:
    """Learners zero the rows they never train on (invalid ones): 0 is no value of Discrete(4, start=3), and an
    unclamped one-hot would index outside the part (torch's scatter raises, numpy writes another part's column)."""
    obs = ObsSpace(shape=(2,), dtype="uint8", parts=(DiscretePart(n=2), DiscretePart(n=4, start=3)))
    manifest = PolicyManifest.of(Spaces(obs=obs, action=DiscreteActions(n=2)), NetConfig(hidden=[4]), "categorical")
    zeros = np.zeros((3, 2), np.uint8)
    assert ObsEncoder(obs, None)(zeros).tolist() == [[1.0, 0.0, 1.0, 0.0, 0.0, 0.0]] * 3
    with torch.no_grad():
        assert PolicyNet(manifest)(torch.from_numpy(zeros)).shape == (3, 2)


def test_box_manifests_serialise_as_before_parts_existed() -> None:
    spaces = Spaces(obs=ObsSpace(shape=(4,), dtype="float32"), action=DiscreteActions(n=2))
    manifest = PolicyManifest.of(spaces, NetConfig(hidden=[64, 64]), "categorical")
    assert manifest.to_json() == (  # the manifest rlfleet wrote before observation parts existed, byte for byte
        '{"encoder":{"kind":"mlp"},"format":"rlfleet.policy","head":"categorical","net":{"activation":"relu",'
        '"hidden":[64,64]},"obs_norm":null,"spaces":{"action":{"kind":"discrete","n":2},"action_mask_offset":null,'
        '"obs":{"dtype":"float32","shape":[4]}},"version":1}')


@pytest.mark.parametrize("name", ALL_SPACES)
def test_a_manifest_with_parts_reads_back_equal(name: str) -> None:
    manifest = PolicyManifest.of(describe(raw_env(name)), NetConfig(hidden=[8]), "q_values")
    assert PolicyManifest.from_json(manifest.to_json()) == manifest
