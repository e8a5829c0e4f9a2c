"""A collector whose payloads disagree with their reports, against a live run: a real coordinator, a real rlfleet
collector and a real DQN learner on loopback, and a hostile client holding a collector token that reports three
chunks over HTTP whose hash, columns and shapes are all right but whose content is not (fewer rows than
reported, a discrete action outside the space, a NaN reward on a valid row). Each once made the learner exit 4 at
every restart; now each is counted corrupt, leaves the buffer, the producer is flagged, and training goes on."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.storage.layout import chunk_path
from tests.support.configs import small_run_config
from tests.support.fleet import Fleet

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _malformed(schema_arrays: dict[str, np.ndarray], kind: str) -> dict[str, np.ndarray]:
    arrays = {k: v.copy() for k, v in schema_arrays.items()}
    if kind == "short-rows":
        return {k: v[:-3] for k, v in arrays.items()}
    if kind == "action-outside-space":
        arrays["actions"][4, 1] = 7  # CartPole has actions 0 and 1
    else:
        arrays["rewards"][6, 0] = np.nan  # a valid row
    return arrays


class Hostile:
    """Registers as a collector, claims a task and reports chunks like any collector would, with bad content."""

    def __init__(self, fleet: Fleet, store: Path, run_config: RunConfig) -> None:
        self.http = httpx.Client(base_url=fleet.url, timeout=10,
                                 headers={"Authorization": f"Bearer {fleet.tokens['collector']}"})
        self.store, self.config = store, run_config
        reply = self.post("/v1/workers", {"kind": "collector", "name": "hostile", "request_id": uuid.uuid4().hex})
        self.worker_id = reply["worker_id"]
        claim = self.post(f"/v1/workers/{self.worker_id}/claim", {})
        assert claim["task"] is not None, claim
        self.task_id = claim["task"]["task_id"]
        policy = claim["directive"]["policy"]
        self.version = policy["version"] if policy else 0
        task = claim["task"]
        self.schema = ChunkSchema.of(Spaces.model_validate(task["spaces"]), task["behaviour"]["sample"])

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.http.post(path, json=body)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def report(self, kind: str) -> str:
        steps, n = self.config.collector.chunk_steps, self.config.collector.num_envs
        good = self.schema.allocate(steps, n)
        rng = np.random.default_rng(0)
        good["obs"][:] = rng.normal(scale=0.05, size=good["obs"].shape)
        good["next_obs"][:] = rng.normal(scale=0.05, size=good["next_obs"].shape)
        good["actions"][:] = rng.integers(0, 2, good["actions"].shape)
        good["rewards"][:] = 1.0
        good["terminated"][:], good["truncated"][:] = False, False
        arrays = _malformed(good, kind)
        chunk_id = uuid.uuid4().hex
        path = chunk_path(self.task_id, chunk_id)
        data = encode_chunk(arrays, {"chunk_id": chunk_id})
        (self.store / path).parent.mkdir(parents=True, exist_ok=True)
        (self.store / path).write_bytes(data)
        self.post("/v1/chunks", {
            "chunk_id": chunk_id, "worker_id": self.worker_id, "task_id": self.task_id, "payload_path": path,
            "sha256": hashlib.sha256(data).hexdigest(), "size_bytes": len(data), "env_steps": steps * n,
            "num_envs": n, "policy_version": self.version, "fresh_columns": list(range(n))})
        return chunk_id


def test_chunks_whose_content_disagrees_with_their_report_cannot_stop_the_learner(
        tmp_path: Path, data_dir: Path, tokens: dict[str, str]) -> None:
    doc = small_run_config().model_dump(mode="json")
    doc["replay"].update(capacity_transitions=400, min_transitions=64)  # hostile chunks are sampled soon
    doc["budget"]["max_env_steps"] = 10**7
    run_config = RunConfig.model_validate(doc)
    config_file = tmp_path / "run.yaml"
    config_file.write_text(dump_run_config(run_config))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_RUN": run_config.name})
    try:
        fleet.start_coordinator()
        hostile = Hostile(fleet, data_dir / "runs" / run_config.name / "store", run_config)
        fleet.start_worker("collector", "collector")
        learner = fleet.start_worker("learner", "learner")
        fleet.wait_for(lambda: fleet.status().learner.iteration > 0, 120, "the learner to train")
        bad = {hostile.report(kind): kind for kind in ("short-rows", "action-outside-space", "nan-reward")}
        fleet.wait_for(lambda: fleet.status().corrupt_chunks == 3, 120, "all three chunks to be found corrupt")
        trained = fleet.status().learner.iteration
        fleet.wait_for(lambda: fleet.status().learner.iteration > trained + 20, 120, "training to go on")
        assert learner.poll() is None, fleet.logs()
        status = fleet.http.get("/v1/status").json()
        (worker,) = [w for w in status["workers"] if w["name"] == "hostile"]
        assert (worker["corrupt_chunks"], worker["flagged"]) == (3, True)
        log = (tmp_path / "learner.log").read_text()
        for chunk_id, kind in bad.items():
            assert f"reported corrupt chunk {chunk_id}" in log, (kind, log[-3000:])
        assert "its report said 32" in log and "outside the action space [2]" in log and "non-finite" in log
    finally:
        fleet.close()
