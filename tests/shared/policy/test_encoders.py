"""Encoders: what each kind gives the MLP on Atari-sized frames either way round, what it refuses, and that policy
files of every kind are the same bytes for the same weights (and MLP ones the bytes they always were)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.shared.config.base import CnnEncoder, ImpalaEncoder, MlpEncoder, NatureEncoder, NetConfig
from rlfleet.shared.payloads.spaces import BoxPart, DiscreteActions, DiscretePart, ImagePart, ObsSpace, Spaces
from rlfleet.shared.policy.files import decode_policy, policy_bytes
from rlfleet.shared.policy.manifest import PolicyManifest, encoder_features, encoder_for
from rlfleet.shared.policy.nets import PolicyNet
from tests.support.policies import CARTPOLE

torch.set_num_threads(1)
STACK_FIRST = ObsSpace(shape=(4, 84, 84), dtype="uint8")  # FrameStackObservation of 84x84 grayscale frames
STACK_LAST = ObsSpace(shape=(84, 84, 4), dtype="uint8")
ENCODERS = {"nature": NatureEncoder(), "impala": ImpalaEncoder(), "cnn": CnnEncoder()}
FEATURES = {"nature": 64 * 7 * 7, "impala": 32 * 11 * 11, "cnn": 32 * 21 * 21}  # 84 -> 20 -> 9 -> 7; 84 -> 42 -> ...


def image_manifest(obs: ObsSpace, encoder: dict | None, hidden: tuple[int, ...] = (512,)) -> PolicyManifest:
    return PolicyManifest.of(Spaces(obs=obs, action=DiscreteActions(n=6)), NetConfig(hidden=hidden, encoder=encoder),
                             "categorical")


@pytest.mark.parametrize("obs", [STACK_FIRST, STACK_LAST], ids=["channels-first", "channels-last"])
@pytest.mark.parametrize("kind", sorted(ENCODERS))
def test_each_image_encoder_reads_84x84x4_stacks_either_way_round(obs: ObsSpace, kind: str) -> None:
    encoder = ENCODERS[kind]
    assert encoder_features(encoder, obs) == FEATURES[kind]
    net = PolicyNet(image_manifest(obs, encoder.model_dump()))
    frames = torch.randint(0, 256, (5, *obs.shape), dtype=torch.uint8)
    with torch.no_grad():
        assert net.features(frames).shape == (5, FEATURES[kind])  # the analytic count is what the convolutions give
        assert net(frames).shape == (5, 6)


def test_channels_last_and_first_stacks_give_the_same_outputs_for_the_same_frames() -> None:
    """The encoder reads a channels-last stack as the channels-first one it is a transpose of."""
    torch.manual_seed(0)
    first = PolicyNet(image_manifest(STACK_FIRST, {"kind": "nature"}))
    last = PolicyNet(image_manifest(STACK_LAST, {"kind": "nature"}))
    last.load_state_dict(first.state_dict())
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(last(frames.permute(0, 2, 3, 1).contiguous()), first(frames))


def test_parameter_counts_of_the_atari_policies() -> None:
    """The Nature actor at net.hidden [512] is SB3's CnnPolicy without its value head (1,687,206 + 513); the small
    CNN's 14,112 features make it four times as large."""
    def count(kind: str) -> int:
        return sum(p.numel() for p in PolicyNet(image_manifest(STACK_FIRST, {"kind": kind})).parameters())
    assert count("nature") == 1_687_206
    assert count("cnn") == 7_234_166
    assert count("impala") < count("nature") * 2


def test_impala_channels_set_the_stages() -> None:
    obs = ObsSpace(shape=(3, 64, 64), dtype="uint8")
    assert encoder_features(ImpalaEncoder(channels=(8,)), obs) == 8 * 32 * 32
    assert encoder_features(ImpalaEncoder(channels=(8, 16, 16, 16)), obs) == 16 * 4 * 4
    net = PolicyNet(image_manifest(obs, {"kind": "impala", "channels": [8, 16, 16, 16]}, hidden=(32,)))
    assert net(torch.zeros((2, 3, 64, 64), dtype=torch.uint8)).shape == (2, 6)


def test_the_nature_encoder_refuses_frames_smaller_than_36x36_naming_what_fits() -> None:
    assert encoder_features(NatureEncoder(), ObsSpace(shape=(36, 36, 1), dtype="uint8")) == 64
    with pytest.raises(ValueError, match=r"algo.net.encoder: the nature encoder needs frames of at least 36x36 .*"
                                         r"nothing of 10x10\): use \{kind: impala\} or \{kind: cnn\}"):
        encoder_features(NatureEncoder(), ObsSpace(shape=(10, 10, 4), dtype="uint8"))  # MinAtar's frames
    with pytest.raises(ValueError, match="nothing of 84x35"):
        encoder_features(NatureEncoder(), ObsSpace(shape=(4, 84, 35), dtype="uint8"))
    with pytest.raises(ValueError, match="algo.net.encoder"):
        PolicyNet(image_manifest(ObsSpace(shape=(10, 10, 4), dtype="uint8"), {"kind": "nature"}))


@pytest.mark.parametrize("kind", sorted(ENCODERS))
def test_image_encoders_refuse_flat_observations(kind: str) -> None:
    with pytest.raises(ValueError, match=rf"algo.net.encoder: the {kind} encoder reads images .* observes "
                                         r"float32\[4\]: use \{kind: mlp\} or leave algo.net.encoder out"):
        encoder_features(ENCODERS[kind], CARTPOLE.obs)


def test_the_mlp_reads_images_flattened() -> None:
    assert encoder_features(MlpEncoder(), STACK_FIRST) == 4 * 84 * 84


def test_a_null_encoder_is_chosen_by_observation() -> None:
    assert encoder_for(NetConfig(), CARTPOLE.obs) == MlpEncoder()
    assert encoder_for(NetConfig(), STACK_FIRST) == CnnEncoder()
    assert encoder_for(NetConfig(encoder={"kind": "impala"}), STACK_FIRST) == ImpalaEncoder()


@pytest.mark.parametrize("kind", sorted(ENCODERS))
def test_equal_weights_give_byte_identical_policy_files(kind: str) -> None:
    files = []
    for _ in range(2):
        manifest = image_manifest(STACK_FIRST, {"kind": kind}, hidden=(64,))
        torch.manual_seed(7)
        files.append(policy_bytes(PolicyNet(manifest).state_dict(), manifest))
    assert files[0] == files[1]
    manifest, state = decode_policy(files[0])
    assert manifest.encoder.kind == kind and manifest.net.model_dump() == {"hidden": (64,), "activation": "relu"}


def test_mlp_manifests_are_the_json_they_were_before_encoders_were_configurable() -> None:
    """`net` keeps only the MLP: an MLP policy's file (and its sha256) does not change with this release."""
    manifest = PolicyManifest.of(CARTPOLE, NetConfig(hidden=(64, 64), activation="tanh"), "categorical")
    assert manifest.to_json() == (
        '{"encoder":{"kind":"mlp"},"format":"rlfleet.policy","head":"categorical","net":{"activation":"tanh",'
        '"hidden":[64,64]},"obs_norm":null,"spaces":{"action":{"kind":"discrete","n":2},"action_mask_offset":null,'
        '"obs":{"dtype":"float32","shape":[4]}},"version":1}')


def test_a_cnn_policy_file_written_before_encoders_were_configurable_still_loads() -> None:
    old = ('{"encoder":{"channels":[16,32],"kind":"cnn"},"format":"rlfleet.policy","head":"categorical",'
           '"net":{"activation":"relu","hidden":[64]},"obs_norm":null,"spaces":{"action":{"kind":"discrete","n":4},'
           '"action_mask_offset":null,"obs":{"dtype":"uint8","shape":[5,5,3]}},"version":1}')
    manifest = PolicyManifest.from_json(old)
    assert manifest.to_json() == old
    net = PolicyNet(manifest)
    assert sorted(net.state_dict()) == ["body.0.bias", "body.0.weight", "body.2.bias", "body.2.weight",
                                        "conv.0.bias", "conv.0.weight", "conv.2.bias", "conv.2.weight"]
    assert net(torch.from_numpy(np.zeros((1, 5, 5, 3), np.uint8))).shape == (1, 4)


# {"cam": 12x10x3 image, "gear": Discrete(3), "speed": Box(2)}, flattened by rlfleet's env builder
MULTI_INPUT = ObsSpace(shape=(363,), dtype="float32",
                       parts=(ImagePart(shape=(12, 10, 3)), DiscretePart(n=3), BoxPart(size=2)))


@pytest.mark.parametrize("kind", ["cnn", "impala"])
def test_a_dict_with_an_image_gets_a_cnn_for_the_image_and_its_other_entries_beside(kind: str) -> None:
    m = image_manifest(MULTI_INPUT, {"kind": kind}, hidden=(8,))
    features = encoder_features(m.encoder, MULTI_INPUT)
    conv = {"cnn": 32 * 3 * 3, "impala": 32 * 2 * 2}[kind]  # 12x10 halved (rounding up) twice / three times
    assert features == conv + 3 + 2
    net = PolicyNet(m)
    assert net.body[0].in_features == features and len(net.convs) == 1
    rng = np.random.default_rng(0)
    obs = np.concatenate([rng.integers(0, 256, (4, 360)), rng.integers(0, 3, (4, 1)), rng.normal(size=(4, 2))],
                         axis=1)
    x = torch.from_numpy(obs.astype(np.float32))
    with torch.no_grad():
        image = net.convs[0](x[:, :360].reshape(4, 12, 10, 3).permute(0, 3, 1, 2) / 255.0)
        expected = torch.cat([image, torch.nn.functional.one_hot(x[:, 360].long(), 3).float(), x[:, 361:]], dim=1)
        torch.testing.assert_close(net.features(x), expected)
        moved = x.clone()
        moved[:, 0] = 255 - moved[:, 0]  # one pixel: the output follows the image
        assert not torch.equal(net(moved), net(x))


def test_a_dict_with_an_image_defaults_to_the_cnn_and_refuses_an_mlp_naming_what_reads_it() -> None:
    assert encoder_for(NetConfig(), MULTI_INPUT) == CnnEncoder()
    with pytest.raises(ValueError, match=r"holds images, which an mlp encoder cannot read: use \{kind: cnn\}"):
        encoder_features(MlpEncoder(), MULTI_INPUT)
    with pytest.raises(ValueError, match="the nature encoder needs frames of at least 36x36"):
        encoder_features(NatureEncoder(), MULTI_INPUT)
