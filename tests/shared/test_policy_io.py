"""Policy files: safetensors in the store, verified by sha256 on load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from shared.config import NetConfig
from shared.inference import NumpyPolicy
from shared.nets import policy_network
from shared.policy_io import load_policy, save_policy
from shared.store import IntegrityError, LocalStore, sha256_hex
from shared.wire import PolicyRef

torch.set_num_threads(1)


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def make_state(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return policy_network(4, 2, NetConfig(hidden=(8, 8))).state_dict()


def test_roundtrip(local_store: LocalStore):
    state = make_state(0)
    ref = save_policy(local_store, 3, state)
    assert ref.version == 3
    assert ref.path == "policies/v00000003.safetensors"
    raw = local_store.resolve(ref.path).read_bytes()
    assert ref.sha256 == sha256_hex(raw)
    loaded = load_policy(local_store, ref)
    assert set(loaded) == set(state)
    for key, value in state.items():
        np.testing.assert_array_equal(loaded[key], value.numpy())
        assert loaded[key].dtype == np.float32
    # The numpy network the collectors and the evaluator run computes what the learner's torch network does.
    policy = NumpyPolicy(4, 2, NetConfig(hidden=(8, 8)), np.random.default_rng(0))
    policy.load(loaded)
    probe = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    source = policy_network(4, 2, NetConfig(hidden=(8, 8)))
    source.load_state_dict(state)
    with torch.no_grad():
        np.testing.assert_allclose(policy(probe.numpy()), source(probe).numpy(), rtol=1e-5, atol=1e-6)


def test_saved_file_is_safetensors(local_store: LocalStore):
    state = make_state(1)
    ref = save_policy(local_store, 1, state)
    with safe_open(str(local_store.resolve(ref.path)), framework="pt") as fh:
        assert set(fh.keys()) == set(state)
        for key in fh.keys():  # noqa: SIM118 - safe_open handles are not mappings
            assert torch.equal(fh.get_tensor(key), state[key])


def test_saving_non_contiguous_and_grad_tensors(local_store: LocalStore):
    weight = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous
    param = torch.nn.Parameter(torch.ones(2))
    ref = save_policy(local_store, 2, {"w": weight, "p": param})
    loaded = load_policy(local_store, ref)
    np.testing.assert_array_equal(loaded["w"], weight.numpy())
    np.testing.assert_array_equal(loaded["p"], np.ones(2, np.float32))


def test_versions_do_not_overwrite_each_other(local_store: LocalStore):
    ref1 = save_policy(local_store, 1, make_state(1))
    ref2 = save_policy(local_store, 2, make_state(2))
    assert ref1.path != ref2.path and ref1.sha256 != ref2.sha256
    np.testing.assert_array_equal(load_policy(local_store, ref1)["0.weight"], make_state(1)["0.weight"].numpy())


def test_sha_mismatch_raises(local_store: LocalStore):
    ref = save_policy(local_store, 1, make_state(0))
    wrong = PolicyRef(version=1, path=ref.path, sha256="0" * 64)
    with pytest.raises(IntegrityError):
        load_policy(local_store, wrong)


def test_changed_file_raises(local_store: LocalStore):
    ref = save_policy(local_store, 1, make_state(0))
    path = local_store.resolve(ref.path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        load_policy(local_store, ref)


def test_missing_file_raises(local_store: LocalStore):
    ref = save_policy(local_store, 1, make_state(0))
    local_store.delete(ref.path)
    with pytest.raises(FileNotFoundError):
        load_policy(local_store, ref)
