"""Fault injection against the live app: a full journal, lying reports, corrupt payloads, retried mutations,
long leases, a full fleet. Each case checks what a user would lose if the coordinator got it wrong."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.storage.layout import chunk_path, policy_path
from rlfleet.shared.storage.local import LocalStore
from tests.support.api import auth, make_settings, running_client, store_for
from tests.support.configs import small_run_config
from tests.support.journal import fill_journal, free_journal

CONFIG = small_run_config()
ROWS = CONFIG.collector.num_envs * CONFIG.collector.chunk_steps


class Fleet:
    """One collector, one learner and one evaluator holding their tasks, and helpers to act as them."""

    def __init__(self, client: TestClient, tokens: dict[str, str], store: LocalStore) -> None:
        self.client, self.tokens, self.store = client, tokens, store
        self.ids = {kind: self.register(kind) for kind in ("collector", "learner", "evaluator")}
        self.task = {kind: self.post(kind, f"/v1/workers/{wid}/claim").json()["task"]["task_id"]
                     for kind, wid in self.ids.items()}

    def post(self, kind: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(path, json=body, headers=auth(self.tokens[kind]))

    def register(self, kind: str, request_id: str | None = None) -> str:
        resp = self.post(kind, "/v1/workers", {"kind": kind, "name": "host", "request_id": request_id})
        assert resp.status_code == 200, resp.text
        return str(resp.json()["worker_id"])

    def report(self, chunk_id: str | None = None, *, payload: bytes | None = None, **changes: Any) -> dict[str, Any]:
        """A valid chunk report of the collector's task, its payload written to the store."""
        chunk_id = chunk_id or uuid.uuid4().hex
        task = self.task["collector"]
        path = chunk_path(task, chunk_id)
        if payload is None:
            rng = np.random.default_rng(0)
            steps, envs = CONFIG.collector.chunk_steps, CONFIG.collector.num_envs
            payload = encode_chunk({
                "obs": rng.standard_normal((steps, envs, 4)).astype(np.float32),
                "actions": rng.integers(0, 2, (steps, envs)).astype(np.int64),
                "rewards": np.ones((steps, envs), np.float32), "terminated": np.zeros((steps, envs), bool),
                "truncated": np.zeros((steps, envs), bool),
                "next_obs": rng.standard_normal((steps, envs, 4)).astype(np.float32),
                "valid": np.ones((steps, envs), bool)}, {"task_id": task, "chunk_id": chunk_id})
        sha = self.store.put(path, payload)
        body = {"chunk_id": chunk_id, "worker_id": self.ids["collector"], "task_id": task, "payload_path": path,
                "sha256": sha, "size_bytes": len(payload), "env_steps": ROWS, "num_envs": CONFIG.collector.num_envs,
                "ends": [ROWS - 1], "episodes": [{"ret": 10.0, "length": 10}], "policy_version": 0}
        body.update(changes)
        return body

    def publish(self, version: int) -> Any:
        path = policy_path(version)
        sha = self.store.put(path, f"weights {version}".encode())
        return self.post("learner", "/v1/policies", {"worker_id": self.ids["learner"], "iteration": version,
                                                     "policy": {"version": version, "path": path, "sha256": sha}})

    def status(self) -> dict[str, Any]:
        return dict(self.client.get("/v1/status", headers=auth(self.tokens["read"])).json())


@pytest.fixture
def settings_tokens(tmp_path: Path) -> tuple[Any, dict[str, str]]:
    return make_settings(tmp_path / "c")


@pytest.fixture
def fleet(settings_tokens: tuple[Any, dict[str, str]]) -> Iterator[Fleet]:
    settings, tokens = settings_tokens
    with running_client(settings) as client:
        yield Fleet(client, tokens, store_for(settings))


# ----- commit before acknowledge ----------------------------------------------------------------------------
def test_a_chunk_is_never_acknowledged_when_its_commit_fails_and_its_retry_counts_once(
        settings_tokens: tuple[Any, dict[str, str]]) -> None:
    settings, tokens = settings_tokens
    with running_client(settings) as client:
        fleet = Fleet(client, tokens, store_for(settings))
        journal = client.app.state.run.ctx.journal  # type: ignore[attr-defined]
        report = fleet.report("c-full")
        fill_journal(journal)
        first = fleet.post("collector", "/v1/chunks", report)
        assert first.status_code == 503 and first.json()["error"] == "journal_unavailable", first.text
        assert fleet.status()["env_steps"] == 0  # memory rolled back to what the journal holds
        retry = fleet.post("collector", "/v1/chunks", report)
        assert retry.status_code == 503  # never a duplicate-ack of something that was not kept
        free_journal(journal)
        ok = fleet.post("collector", "/v1/chunks", report)
        assert ok.status_code == 200 and ok.json()["duplicate"] is False, ok.text
        again = fleet.post("collector", "/v1/chunks", report)
        assert again.json()["duplicate"] is True
        assert fleet.status()["env_steps"] == ROWS
    with running_client(settings) as client:  # restart: the acknowledged chunk is there, exactly once
        st = client.get("/v1/status", headers=auth(tokens["read"])).json()
        assert (st["env_steps"], st["chunks"], st["buffers"][0]["chunks"]) == (ROWS, 1, 1)


def test_a_publish_whose_commit_fails_is_undone_and_never_shown_to_workers(fleet: Fleet) -> None:
    journal = fleet.client.app.state.run.ctx.journal  # type: ignore[attr-defined]
    assert fleet.publish(1).status_code == 200
    fill_journal(journal)
    assert fleet.publish(2).status_code == 503
    free_journal(journal)
    hb = fleet.post("collector", f"/v1/workers/{fleet.ids['collector']}/heartbeat")
    assert hb.json()["directive"]["policy"]["version"] == 1
    assert fleet.status()["policy_version"] == 1
    assert fleet.publish(2).status_code == 200  # the retry is a fresh publish, not a conflict


# ----- reports that lie ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("changes", "hint"), [
    ({"env_steps": 50_000, "payload": b"x"}, "env_steps"),
    ({"policy_version": 7}, "never published"),
    ({"num_envs": 1}, "num_envs"),
    ({"ends": [], "episodes": [{"ret": 1.0, "length": 5}]}, "episode ends"),
    ({"env_errors": 5}, "env_errors"),
    ({"size_bytes": 1}, "bytes"),
])
def test_lying_chunk_reports_are_refused_and_change_nothing(fleet: Fleet, changes: dict[str, Any], hint: str) -> None:
    payload = changes.pop("payload", None)
    report = fleet.report(payload=payload, **changes)
    if payload is not None:
        report["size_bytes"] = len(payload)
    resp = fleet.post("collector", "/v1/chunks", report)
    assert resp.status_code == 422 and hint in resp.json()["message"], resp.text
    assert fleet.status()["env_steps"] == 0


def test_a_worker_may_only_report_chunks_of_the_task_it_holds(fleet: Fleet) -> None:
    other = fleet.register("collector")
    report = fleet.report(worker_id=other)
    resp = fleet.post("collector", "/v1/chunks", report)
    assert resp.status_code == 409 and resp.json()["error"] == "task_not_held", resp.text


def test_a_batch_accepts_and_refuses_each_report_on_its_own(fleet: Fleet) -> None:
    good, bad = fleet.report(), fleet.report(policy_version=9)
    resp = fleet.post("collector", "/v1/chunk-batches", {"reports": [good, bad, good]})
    assert resp.status_code == 200, resp.text
    verdicts = resp.json()["results"]
    assert [(v["duplicate"], v["error"]) for v in verdicts] == [(False, None), (False, "invalid"), (True, None)]
    assert fleet.status()["env_steps"] == ROWS


def test_a_batch_of_fresh_chunks_is_taken_in_whole_and_a_changed_repeat_is_a_conflict(fleet: Fleet) -> None:
    reports = [fleet.report() for _ in range(5)]
    changed = {**reports[1], "sha256": "f" * 64}
    resp = fleet.post("collector", "/v1/chunk-batches", {"reports": [*reports, changed]})
    assert resp.status_code == 200, resp.text
    verdicts = resp.json()["results"]
    assert [(v["duplicate"], v["error"]) for v in verdicts] == [(False, None)] * 5 + [(False, "conflict")]
    status = fleet.status()
    assert status["env_steps"] == 5 * ROWS and status["chunks"] == 5 and status["buffers"][0]["chunks"] == 5


# ----- corruption is reported, not hidden -------------------------------------------------------------------
def test_a_corrupt_chunk_leaves_the_buffer_and_a_worker_that_keeps_sending_them_is_flagged(fleet: Fleet) -> None:
    reports = [fleet.report() for _ in range(4)]
    for report in reports:
        assert fleet.post("collector", "/v1/chunks", report).status_code == 200
    buffer = "/v1/buffers/replay-0/corrupt"
    for i, report in enumerate(reports[:3]):
        resp = fleet.post("learner", buffer, {"worker_id": fleet.ids["learner"], "chunk_id": report["chunk_id"],
                                              "reason": "sha256 mismatch"})
        assert resp.json()["removed"] is True
        st = fleet.status()
        assert st["corrupt_chunks"] == i + 1 and st["buffers"][0]["chunks"] == 3 - i
    again = fleet.post("learner", buffer, {"worker_id": fleet.ids["learner"], "chunk_id": reports[0]["chunk_id"],
                                           "reason": "again"})
    assert again.json()["removed"] is False  # reported twice: counted once
    collector = next(w for w in fleet.status()["workers"] if w["worker_id"] == fleet.ids["collector"])
    assert (collector["corrupt_chunks"], collector["flagged"]) == (3, True)
    refused = fleet.post("collector", "/v1/chunks", fleet.report())
    assert refused.status_code == 403 and refused.json()["error"] == "worker_flagged"
    assert "rlfleet_corrupt_chunks_total 3.0" in fleet.client.get("/metrics").text


# ----- idempotent retries -----------------------------------------------------------------------------------
def test_a_retried_registration_returns_the_same_worker(fleet: Fleet) -> None:
    before = len(fleet.status()["workers"])
    request_id = uuid.uuid4().hex
    first, second = fleet.register("collector", request_id), fleet.register("collector", request_id)
    assert first == second
    assert len(fleet.status()["workers"]) == before + 1


def test_a_retried_evaluation_is_recorded_once(fleet: Fleet) -> None:
    assert fleet.publish(1).status_code == 200
    body = {"worker_id": fleet.ids["evaluator"], "policy_version": 1, "request_id": "eval-1",
            "returns": [1.0] * CONFIG.evaluation.episodes, "lengths": [1] * CONFIG.evaluation.episodes}
    first, second = fleet.post("evaluator", "/v1/evaluations", body), fleet.post("evaluator", "/v1/evaluations", body)
    assert first.json() == second.json()
    assert len(fleet.client.get("/v1/evaluations", headers=auth(fleet.tokens["read"])).json()) == 1


def test_an_evaluation_of_too_few_episodes_cannot_end_the_run(fleet: Fleet) -> None:
    assert fleet.publish(1).status_code == 200
    resp = fleet.post("evaluator", "/v1/evaluations", {"worker_id": fleet.ids["evaluator"], "policy_version": 1,
                                                       "returns": [500.0], "lengths": [500]})
    assert resp.status_code == 422 and "evaluation.episodes" in resp.json()["message"]
    assert fleet.status()["run_state"] == "running"


def test_a_retried_sample_gets_the_same_items_and_consumes_nothing_twice(fleet: Fleet) -> None:
    for _ in range(4):
        assert fleet.post("collector", "/v1/chunks", fleet.report()).status_code == 200
    body = {"worker_id": fleet.ids["learner"], "batch_size": 32, "num_batches": 1, "request_id": "s-1"}
    first = fleet.post("learner", "/v1/buffers/replay-0/sample", body)
    assert first.status_code == 200, first.text
    sampled = fleet.status()["buffers"][0]["sampled_transitions"]
    second = fleet.post("learner", "/v1/buffers/replay-0/sample", body)
    assert second.json()["ids"] == first.json()["ids"]
    assert fleet.status()["buffers"][0]["sampled_transitions"] == sampled


# ----- leases and the fleet's size ---------------------------------------------------------------------------
def test_long_leases_allow_long_polls_within_half_a_lease(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path / "long", lease_seconds=60.0)
    with running_client(settings) as client:
        reply = client.post("/v1/workers", json={"kind": "collector", "name": "h"}, headers=auth(tokens["collector"]))
        assert reply.json()["max_wait_seconds"] == 30.0
        worker = reply.json()["worker_id"]
        hb = client.post(f"/v1/workers/{worker}/heartbeat?newer_than=0&wait=0.2", headers=auth(tokens["collector"]))
        assert hb.status_code == 200, hb.text


def test_registrations_beyond_the_fleet_cap_are_refused_with_429(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path / "cap", max_workers=2)
    with running_client(settings) as client:
        codes = [client.post("/v1/workers", json={"kind": "collector", "name": "h"},
                             headers=auth(tokens["collector"])).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
