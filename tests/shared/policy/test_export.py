"""Exported policies (ONNX through onnxruntime, TorchScript through torch.jit.load) act exactly as rlfleet's own
actors do, for every head, with observation normalisation, an action mask and every image encoder."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.payloads.spaces import (
    BoxActions,
    BoxPart,
    DiscreteActions,
    DiscretePart,
    ImagePart,
    MultiBinaryPart,
    MultiDiscreteActions,
    MultiDiscretePart,
    ObsPart,
    ObsSpace,
    Spaces,
)
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.export import ExportError, check_exportable, export_bytes
from rlfleet.shared.policy.manifest import Head, ObsNorm, PolicyManifest
from tests.support.policies import CARTPOLE, manifest, policy_state

torch.set_num_threads(1)
OBSERVATIONS = 1_000
MULTI = Spaces(obs=ObsSpace(shape=(2, 3), dtype="float32"), action=MultiDiscreteActions(nvec=(3, 2)))
BOX = Spaces(obs=ObsSpace(shape=(3,), dtype="float32"), action=BoxActions(low=(-2.0, 0.0), high=(2.0, 0.5)))
MASKED = Spaces(obs=ObsSpace(shape=(7,), dtype="float32"), action=DiscreteActions(n=4), action_mask_offset=0)
IMAGE_LAST = Spaces(obs=ObsSpace(shape=(40, 40, 3), dtype="uint8"), action=DiscreteActions(n=4))
IMAGE_FIRST = Spaces(obs=ObsSpace(shape=(4, 40, 40), dtype="uint8"), action=BoxActions(low=(-1.0,), high=(3.0,)))
# A Dict observation {"cam": 6x6x3 image, "mode": Discrete(3), "pos": Box(2)}, image first in the flat vector
MULTI_INPUT = Spaces(obs=ObsSpace(shape=(111,), dtype="float32", parts=(ImagePart(shape=(6, 6, 3)),
                                                                       DiscretePart(n=3), BoxPart(size=2))),
                     action=DiscreteActions(n=4))
# POPGym-like integer observations: a Discrete(4), a MultiDiscrete [3, 2] starting at (0, -1), one binary value
PARTS = Spaces(obs=ObsSpace(shape=(4,), dtype="int8", parts=(DiscretePart(n=4), MultiDiscretePart(nvec=(3, 2),
               start=(0, -1)), MultiBinaryPart(size=1))), action=DiscreteActions(n=3))
FLAT_CASES: list[tuple[Spaces, Head]] = [(CARTPOLE, "q_values"), (PARTS, "categorical"), (PARTS, "q_values"),
                                         (CARTPOLE, "categorical"), (MASKED, "q_values"),
                                         (MASKED, "categorical"), (MULTI, "multi_categorical"), (BOX, "gaussian"),
                                         (BOX, "gaussian_sde"), (BOX, "tanh_gaussian")]
IMAGE_CASES: list[tuple[Spaces, Head, str]] = [(IMAGE_LAST, "categorical", "cnn"), (IMAGE_LAST, "q_values", "nature"),
                                               (IMAGE_FIRST, "tanh_gaussian", "impala")]


def observations(spaces: Spaces, n: int = OBSERVATIONS, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if spaces.obs.parts:  # each part's values as the env gives them
        return np.concatenate([part_values(part, rng, n) for part in spaces.obs.parts], axis=1).astype(spaces.obs.dtype)
    if spaces.obs.dtype == "uint8":
        return rng.integers(0, 256, (n, *spaces.obs.shape)).astype(np.uint8)
    obs = (3.0 * rng.standard_normal((n, *spaces.obs.shape))).astype(np.float32)
    if spaces.action_mask_offset is not None:  # masks allowing a random subset (some rows none: then all are legal)
        obs[:, :4] = rng.random((n, 4)) < 0.4
    return obs


def part_values(part: ObsPart, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(part, ImagePart):
        return rng.integers(0, part.image_max + 1, (n, part.size))
    if isinstance(part, DiscretePart):
        return rng.integers(part.start, part.start + part.n, (n, 1))
    if isinstance(part, MultiDiscretePart):
        return np.stack([rng.integers(s, s + k, n) for k, s in zip(part.nvec, part.start, strict=True)], axis=1)
    if isinstance(part, MultiBinaryPart):
        return rng.integers(0, 2, (n, part.size))
    return 3.0 * rng.standard_normal((n, part.size))


def normalised(m: PolicyManifest) -> PolicyManifest:
    """`m` with observation statistics far from the identity, so a model that skipped them would act otherwise."""
    size = int(np.prod(m.spaces.obs.norm_shape))  # the box values: parts' one-hots are never normalised
    rng = np.random.default_rng(3)
    norm = ObsNorm(mean=tuple(rng.normal(size=size).tolist()), var=tuple(rng.uniform(0.1, 4.0, size).tolist()),
                   clip=2.0)
    return m.model_copy(update={"obs_norm": norm})


def run_onnx(model: bytes, obs: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    (actions,) = session.run(None, {"obs": obs})
    return actions


def run_torchscript(model: bytes, obs: np.ndarray) -> np.ndarray:
    loaded = torch.jit.load(io.BytesIO(model))
    with torch.no_grad():
        return loaded(torch.from_numpy(obs)).numpy()


RUNNERS = {"onnx": run_onnx, "torchscript": run_torchscript}


def assert_same_actions(m: PolicyManifest, state: dict[str, np.ndarray], fmt: str, n: int = OBSERVATIONS) -> None:
    obs = observations(m.spaces, n)
    expected = build_actor(m, state).greedy(obs)
    actions = RUNNERS[fmt](export_bytes(m, state, fmt), obs)  # type: ignore[arg-type]
    assert actions.shape == expected.shape
    assert actions.dtype == expected.dtype
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(actions, expected)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize(("spaces", "head"), FLAT_CASES,
                         ids=[f"{s.action.kind}-{h}{'-parts' if s.obs.parts else ''}" for s, h in FLAT_CASES])
def test_an_exported_mlp_policy_acts_as_the_actor_on_raw_observations(spaces: Spaces, head: Head, fmt: str) -> None:
    m = normalised(manifest(spaces, head, (16, 16)))
    assert_same_actions(m, policy_state(m, seed=1), fmt)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize(("spaces", "head", "kind"), IMAGE_CASES, ids=[k for _, _, k in IMAGE_CASES])
def test_an_exported_image_policy_takes_uint8_frames(spaces: Spaces, head: Head, kind: str, fmt: str) -> None:
    m = PolicyManifest.of(spaces, NetConfig(hidden=(16,), encoder={"kind": kind}), head)
    assert_same_actions(m, policy_state(m, seed=2), fmt, n=OBSERVATIONS if kind == "cnn" else 200)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("kind", ["cnn", "impala"])
def test_an_exported_multi_input_policy_reads_the_image_and_the_other_entries(kind: str, fmt: str) -> None:
    m = normalised(PolicyManifest.of(MULTI_INPUT, NetConfig(hidden=(16,), encoder={"kind": kind}), "categorical"))
    assert_same_actions(m, policy_state(m, seed=4), fmt)


def test_a_manifest_field_the_exporter_does_not_reproduce_is_refused_by_name() -> None:
    """A recurrent core (the exported model would act without its memory), and any field a later rlfleet adds."""
    m = manifest(CARTPOLE, "categorical")
    with pytest.raises(ExportError, match=r"cannot export a policy with a core \(kind='gru' hidden=4\)"):
        check_exportable(m.model_copy(update={"core": CoreConfig(kind="gru", hidden=4)}))

    class Later(PolicyManifest):
        future: dict | None = None

    check_exportable(Later(**m.model_dump()))  # unset: nothing changes how it acts
    with pytest.raises(ExportError, match=r"cannot export a policy with a future \(\{'kind': 'x'\}\)"):
        check_exportable(Later(**m.model_dump(), future={"kind": "x"}))


def test_a_head_or_encoder_the_exporter_does_not_know_is_refused_by_name() -> None:
    """Kinds a later rlfleet adds (a multi-input encoder, say) reach the exporter as what they are: refused."""
    m = manifest(CARTPOLE, "categorical")
    with pytest.raises(ExportError, match="cannot export a policy with a 'beta' head: the exporter handles q_values, "):
        check_exportable(m.model_construct(**{**dict(m), "head": "beta"}))
    encoder = m.encoder.model_construct(kind="multi_input")
    with pytest.raises(ExportError, match="cannot export a policy with a 'multi_input' encoder: the exporter handles "
                                          "mlp, cnn, nature, impala"):
        check_exportable(m.model_construct(**{**dict(m), "encoder": encoder}))


def test_an_unknown_format_is_refused_naming_the_formats() -> None:
    m = manifest(CARTPOLE, "categorical")
    with pytest.raises(ExportError, match="use one of onnx, torchscript"):
        export_bytes(m, policy_state(m), "tflite")  # type: ignore[arg-type]
