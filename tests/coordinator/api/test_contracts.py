"""The served JSON Schemas hold for real files: chunks a collector's Rollout made and encoded, and policy files
the learner's own code wrote. The schemas are public, listed, and linked from the OpenAPI description."""

from __future__ import annotations

import base64
import itertools
import json
import struct
from typing import Any

import jsonschema
import msgpack
import numpy as np
import pytest
from fastapi.testclient import TestClient

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.shared.config.base import CoreConfig
from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.payloads.spaces import (
    BoxPart,
    DiscreteActions,
    DiscretePart,
    MultiBinaryPart,
    MultiDiscreteActions,
    ObsSpace,
    Spaces,
)
from rlfleet.shared.policy.files import policy_bytes
from rlfleet.shared.policy.manifest import Behaviour, Head, ObsNorm, PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet
from tests.support.policies import CARTPOLE, PENDULUM, manifest


def _validator(client: TestClient, name: str) -> jsonschema.Draft202012Validator:
    resp = client.get(f"/v1/schemas/{name}")  # no token: the contracts are public
    assert resp.status_code == 200, resp.text
    schema = resp.json()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _as_json(obj: Any) -> Any:
    """A decoded msgpack document as the schema shows it: bin as base64 strings."""
    if isinstance(obj, dict):
        return {k: _as_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_as_json(v) for v in obj]
    return base64.b64encode(obj).decode() if isinstance(obj, bytes) else obj


def _real_chunk(env_id: str, spaces: Spaces, behaviour: Behaviour) -> dict[str, Any]:
    rollout = Rollout(EnvConfig(id=env_id), 2, spaces, behaviour, seed=3)
    try:
        if behaviour.sample:
            m = manifest(spaces, behaviour.head).model_copy(update={"core": behaviour.core})
            rollout.load_policy(m, {k: v.numpy() for k, v in PolicyNet(m).state_dict().items()}, version=1)
        chunk = rollout.collect(300)  # CartPole episodes end within 300 steps: ends are in the file
    finally:
        rollout.close()
    raw = encode_chunk(chunk.arrays, {"task_id": "collector-0", "chunk_id": "c1", "policy_version": 0})
    return _as_json(msgpack.unpackb(raw, raw=False))


def test_listing_names_every_schema(client: TestClient) -> None:
    listing = client.get("/v1/schemas").json()
    assert {s["name"] for s in listing} == {"chunk", "policy"}
    for entry in listing:
        assert client.get(entry["url"]).json()["version"] == entry["version"]
    assert client.get("/v1/schemas/nope").json()["error"] == "not_found"


def test_openapi_description_links_the_schemas(client: TestClient) -> None:
    description = client.get("/openapi.json").json()["info"]["description"]
    assert "/v1/schemas/chunk" in description and "/v1/schemas/policy" in description


@pytest.mark.parametrize(("env_id", "spaces", "behaviour"), [
    ("CartPole-v1", CARTPOLE, Behaviour(head="q_values", sample=False)),
    ("CartPole-v1", CARTPOLE, Behaviour(head="categorical", sample=True)),
    ("Pendulum-v1", PENDULUM, Behaviour(head="gaussian", sample=True)),
    ("CartPole-v1", CARTPOLE, Behaviour(head="categorical", sample=True, core=CoreConfig(kind="lstm", hidden=4))),
], ids=["dqn", "ppo", "ppo-box", "recurrent"])
def test_real_chunks_match_the_served_schema(client: TestClient, env_id: str, spaces: Spaces,
                                             behaviour: Behaviour) -> None:
    validator = _validator(client, "chunk")
    doc = _real_chunk(env_id, spaces, behaviour)
    assert sorted(validator.iter_errors(doc), key=str) == []
    assert ("logp" in doc["arrays"]) == behaviour.sample
    assert ("core_state" in doc["arrays"]) == (behaviour.core is not None)
    broken = json.loads(json.dumps(doc))
    del broken["arrays"]["valid"]
    broken["arrays"]["rewards"]["dtype"] = "float64"
    assert len(list(validator.iter_errors(broken))) == 2


def test_a_real_compact_compressed_chunk_matches_the_served_schema(client: TestClient) -> None:
    """A frame-stacked image run's chunk (the compact layout), zstd-compressed as its collectors write it."""
    from tests.support.frames import twin_rollouts

    compact, flat = twin_rollouts(4, num_envs=2, max_steps=5)
    try:
        chunk = compact.collect(60, random=True)
    finally:
        compact.close()
        flat.close()
    validator = _validator(client, "chunk")
    # The test env's pixels are noise, which zstd leaves raw: blank frames make one column compress.
    arrays = dict(chunk.arrays, frame=np.zeros_like(chunk.arrays["frame"]))
    doc = _as_json(msgpack.unpackb(encode_chunk(arrays, compression="zstd"), raw=False))
    assert sorted(validator.iter_errors(doc), key=str) == []
    assert doc["arrays"]["frame"].get("compression") == "zstd" and "obs" not in doc["arrays"]
    mixed = json.loads(json.dumps(doc))
    mixed["arrays"]["obs"] = mixed["arrays"]["next_obs"] = mixed["arrays"]["frame"]  # both layouts at once
    assert list(validator.iter_errors(mixed)) != []


def _header(data: bytes) -> dict[str, Any]:
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + size])


@pytest.mark.parametrize(("spaces", "head"), [
    (CARTPOLE, "q_values"), (CARTPOLE, "categorical"), (PENDULUM, "gaussian"), (PENDULUM, "gaussian_sde"),
    (PENDULUM, "tanh_gaussian"),
    (Spaces(obs=CARTPOLE.obs, action=MultiDiscreteActions(nvec=(2, 3))), "multi_categorical"),
])
def test_real_policy_files_match_the_served_schema(client: TestClient, spaces: Spaces, head: Head) -> None:
    """The manifest validates, and the tensors are named and shaped as the schema's description says."""
    validator = _validator(client, "policy")
    norm = ObsNorm(mean=(0.0,) * spaces.obs.flat_size, var=(1.0,) * spaces.obs.flat_size)
    m = manifest(spaces, head, hidden=(8, 6)).model_copy(update={"obs_norm": norm})
    header = _header(policy_bytes(PolicyNet(m).state_dict(), m))
    doc = json.loads(header["__metadata__"]["rlfleet.manifest"])
    assert list(validator.iter_errors(doc)) == []
    assert PolicyManifest.model_validate(doc) == m
    width = {"q_values": 2, "categorical": 2, "multi_categorical": 5, "gaussian": 1, "gaussian_sde": 1,
             "tanh_gaussian": 2}[head]
    sizes = [spaces.obs.flat_size, 8, 6, width]
    expected = {f"body.{2 * k}.weight": [b, a] for k, (a, b) in enumerate(itertools.pairwise(sizes))}
    expected |= {f"body.{2 * k}.bias": [b] for k, (_, b) in enumerate(itertools.pairwise(sizes))}
    if head == "gaussian":
        expected["log_std"] = [1]
    if head == "gaussian_sde":  # one per latent feature (the last layer's fan_in) and action dimension
        expected["log_std"] = [6, 1]
    assert {k: v["shape"] for k, v in header.items() if k != "__metadata__"} == expected
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"F32"}


def test_a_real_chunk_of_integer_observations_matches_the_served_schema(client: TestClient) -> None:
    """POPGym's RepeatPreviousEasy under a 4-frame stack: a MultiDiscrete observation stored as its uint8 integers."""
    env = EnvConfig.model_validate({"id": "popgym.envs.repeat_previous:RepeatPreviousEasy",
                                    "wrappers": [{"name": "frame_stack", "frames": 4}]})
    spaces = spaces_of(env)
    rollout = Rollout(env, 2, spaces, Behaviour(head="q_values", sample=False), seed=3)
    try:
        chunk = rollout.collect(60, random=True)
    finally:
        rollout.close()
    doc = _as_json(msgpack.unpackb(encode_chunk(chunk.arrays), raw=False))
    assert sorted(_validator(client, "chunk").iter_errors(doc), key=str) == []
    assert doc["arrays"]["obs"]["dtype"] == "uint8" and doc["arrays"]["obs"]["shape"] == [60, 2, 4]


def test_a_real_policy_file_of_observation_parts_matches_the_served_schema(client: TestClient) -> None:
    """The manifest carries the parts; the first layer reads their encoding (one-hot 3 + box 2 + binary 2 = 7)."""
    obs = ObsSpace(shape=(5,), dtype="float32", parts=(DiscretePart(n=3), BoxPart(size=2), MultiBinaryPart(size=2)))
    spaces = Spaces(obs=obs, action=DiscreteActions(n=2))
    m = manifest(spaces, "categorical", hidden=(8,)).model_copy(
        update={"obs_norm": ObsNorm(mean=(0.0, 0.0), var=(1.0, 1.0))})
    header = _header(policy_bytes(PolicyNet(m).state_dict(), m))
    doc = json.loads(header["__metadata__"]["rlfleet.manifest"])
    assert list(_validator(client, "policy").iter_errors(doc)) == []
    assert PolicyManifest.model_validate(doc) == m
    assert header["body.0.weight"]["shape"] == [8, 7]


@pytest.mark.parametrize(("kind", "gates"), [("gru", 3), ("lstm", 4)])
def test_a_recurrent_policy_files_core_tensors_are_as_the_schema_says(client: TestClient, kind: str,
                                                                      gates: int) -> None:
    validator = _validator(client, "policy")
    m = manifest(CARTPOLE, "categorical", hidden=(8,)).model_copy(update={"core": CoreConfig(kind=kind, hidden=5)})
    header = _header(policy_bytes(PolicyNet(m).state_dict(), m))
    doc = json.loads(header["__metadata__"]["rlfleet.manifest"])
    assert list(validator.iter_errors(doc)) == [] and PolicyManifest.model_validate(doc) == m
    shapes = {k: v["shape"] for k, v in header.items() if k != "__metadata__"}
    assert shapes == {"core.rnn.weight_ih_l0": [gates * 5, 4], "core.rnn.weight_hh_l0": [gates * 5, 5],
                      "core.rnn.bias_ih_l0": [gates * 5], "core.rnn.bias_hh_l0": [gates * 5],
                      "body.0.weight": [8, 5], "body.0.bias": [8], "body.2.weight": [2, 8], "body.2.bias": [2]}
