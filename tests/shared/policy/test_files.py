"""Policy files: safetensors weights plus their manifest in the store, verified by sha256 on load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save as st_save

from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.files import decode_policy, load_policy, policy_bytes, save_policy
from rlfleet.shared.policy.manifest import MANIFEST_KEY, ManifestError
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import IntegrityError, sha256_hex
from rlfleet.shared.wire import PolicyRef
from tests.support.policies import CARTPOLE, manifest

torch.set_num_threads(1)
MANIFEST = manifest(CARTPOLE, "q_values", (8, 8))


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def make_state(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return PolicyNet(MANIFEST).state_dict()


def test_roundtrip(local_store: LocalStore):
    state = make_state(0)
    ref = save_policy(local_store, 3, state, MANIFEST)
    assert ref.version == 3
    assert ref.path == "policies/v00000003.safetensors"
    raw = local_store.resolve(ref.path).read_bytes()
    assert ref.sha256 == sha256_hex(raw)
    loaded_manifest, loaded = load_policy(local_store, ref)
    assert loaded_manifest == MANIFEST
    assert set(loaded) == set(state)
    for key, value in state.items():
        np.testing.assert_array_equal(loaded[key], value.numpy())
        assert loaded[key].dtype == np.float32
    # The numpy actor the collectors and the evaluator run computes what the learner's torch network does.
    actor = build_actor(loaded_manifest, loaded)
    probe = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    source = PolicyNet(MANIFEST)
    source.load_state_dict(state)
    with torch.no_grad():
        np.testing.assert_allclose(actor.forward(probe.numpy()), source(probe).numpy(), rtol=1e-5, atol=1e-6)


def test_saved_file_is_safetensors_with_a_sorted_json_manifest(local_store: LocalStore):
    state = make_state(1)
    ref = save_policy(local_store, 1, state, MANIFEST)
    with safe_open(str(local_store.resolve(ref.path)), framework="pt") as fh:
        assert set(fh.keys()) == set(state)
        for key in fh.keys():  # noqa: SIM118 - safe_open handles are not mappings
            assert torch.equal(fh.get_tensor(key), state[key])
        text = fh.metadata()[MANIFEST_KEY]
    doc = json.loads(text)
    assert doc["head"] == "q_values" and doc["spaces"]["action"] == {"kind": "discrete", "n": 2}
    assert text == json.dumps(doc, sort_keys=True, separators=(",", ":"))


def test_same_weights_give_byte_identical_files():
    """Nothing time- or run-specific in a policy file: reproducible runs can compare files byte for byte."""
    assert policy_bytes(make_state(4), MANIFEST) == policy_bytes(make_state(4), MANIFEST)


def test_saving_non_contiguous_and_grad_tensors(local_store: LocalStore):
    weight = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous
    param = torch.nn.Parameter(torch.ones(2))
    ref = save_policy(local_store, 2, {"w": weight, "p": param}, MANIFEST)
    _, loaded = load_policy(local_store, ref)
    np.testing.assert_array_equal(loaded["w"], weight.numpy())
    np.testing.assert_array_equal(loaded["p"], np.ones(2, np.float32))


def test_versions_do_not_overwrite_each_other(local_store: LocalStore):
    ref1 = save_policy(local_store, 1, make_state(1), MANIFEST)
    ref2 = save_policy(local_store, 2, make_state(2), MANIFEST)
    assert ref1.path != ref2.path and ref1.sha256 != ref2.sha256
    np.testing.assert_array_equal(load_policy(local_store, ref1)[1]["body.0.weight"],
                                  make_state(1)["body.0.weight"].numpy())


def test_a_file_without_manifest_is_refused():
    with pytest.raises(ManifestError, match="no 'rlfleet.manifest'"):
        decode_policy(st_save(make_state(0)))


def test_another_manifest_version_is_refused():
    doc = json.loads(MANIFEST.to_json())
    doc["version"] = 99
    data = st_save(make_state(0), metadata={MANIFEST_KEY: json.dumps(doc)})
    with pytest.raises(ManifestError, match="version 99"):
        decode_policy(data)


@pytest.mark.parametrize("junk", [b"", b"\x00" * 3, b"\xff" * 16, b"\x08\x00\x00\x00\x00\x00\x00\x00{not json"])
def test_junk_is_a_manifest_error(junk: bytes):
    with pytest.raises(ManifestError):
        decode_policy(junk)


def test_sha_mismatch_raises(local_store: LocalStore):
    ref = save_policy(local_store, 1, make_state(0), MANIFEST)
    wrong = PolicyRef(version=1, path=ref.path, sha256="0" * 64)
    with pytest.raises(IntegrityError):
        load_policy(local_store, wrong)


def test_changed_file_raises(local_store: LocalStore):
    ref = save_policy(local_store, 1, make_state(0), MANIFEST)
    path = local_store.resolve(ref.path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        load_policy(local_store, ref)


def test_missing_file_raises(local_store: LocalStore):
    ref = save_policy(local_store, 1, make_state(0), MANIFEST)
    local_store.delete(ref.path)
    with pytest.raises(FileNotFoundError):
        load_policy(local_store, ref)
