"""The happy path over HTTP: collectors, learner, policies, evaluator, solving and stopping, metrics, OpenAPI."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.codec import decode_chunk
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import ChunkAck, ClaimResponse, HeartbeatResponse, RegisterResponse, SampleResponse, Status
from tests.support.api import (
    PUBLIC_PATHS,
    app_routes,
    assert_error_body,
    auth,
    claim,
    get_status,
    make_settings,
    register,
    running_client,
    store_for,
)
from tests.support.chunks import write_chunk, write_policy

Tokens = dict[str, str]


def post(client: TestClient, token: str, path: str, body: Any = None) -> Any:
    return client.post(path, json=body, headers=auth(token))


def report_chunk(client: TestClient, tokens: Tokens, report: dict[str, Any]) -> Any:
    return post(client, tokens["collector"], "/v1/chunks", report)


def publish(client: TestClient, tokens: Tokens, learner: str, policy: dict[str, Any], iteration: int = 1) -> Any:
    return post(client, tokens["learner"], "/v1/policies", {"worker_id": learner, "policy": policy,
                                                            "iteration": iteration})


def learner_with_task(client: TestClient, tokens: Tokens) -> str:
    learner = register(client, tokens["learner"], "learner")
    claim(client, tokens["learner"], learner)
    return learner


# ----- collectors ----------------------------------------------------------------------------------------------
def test_collector_registers_claims_and_reports_a_chunk_exactly_once(
    client: TestClient, tokens: Tokens, store: LocalStore, run_config: RunConfig
) -> None:
    resp = post(client, tokens["collector"], "/v1/workers", {"kind": "collector", "name": "host-a"})
    assert resp.status_code == 200, resp.text
    reg = RegisterResponse.model_validate(resp.json())
    assert reg.worker_id.startswith("collector-") and reg.run_name == run_config.name
    assert reg.lease_seconds == 10.0 and reg.heartbeat_seconds == pytest.approx(2.5)
    assert reg.max_wait_seconds == 5.0  # the longest heartbeat long poll: half a lease
    assert reg.directive.run_state == "running" and reg.directive.policy is None

    resp = post(client, tokens["collector"], f"/v1/workers/{reg.worker_id}/claim")
    assert resp.status_code == 200, resp.text
    task = ClaimResponse.model_validate(resp.json()).task
    assert task is not None and task.kind == "collector" and task.task_id == "collector-0"
    assert task.collector == run_config.collector and task.env == run_config.env
    assert task.behaviour.head == "q_values" and task.behaviour.epsilon == run_config.collector.epsilon
    assert task.spaces.action.kind == "discrete" and task.spaces.obs.shape == (4,) and task.policy is None
    # claiming again re-reads the same task
    again = ClaimResponse.model_validate(post(client, tokens["collector"], f"/v1/workers/{reg.worker_id}/claim").json())
    assert again.task is not None and again.task.task_id == "collector-0"

    rows = run_config.collector.num_envs * run_config.collector.chunk_steps  # 2 envs x 16 steps = 32
    report = write_chunk(store, "collector-0", "chunk-0001", reg.worker_id, episodes=((12.0, 12), (9.0, 9)))
    assert (report["env_steps"], report["num_envs"]) == (rows, run_config.collector.num_envs)
    resp = report_chunk(client, tokens, report)
    assert resp.status_code == 200, resp.text
    ack = ChunkAck.model_validate(resp.json())
    assert ack.chunk_id == "chunk-0001" and ack.duplicate is False and ack.directive.env_steps_total == rows

    status = get_status(client, tokens["read"])
    assert (status["env_steps"], status["episodes"], status["chunks"], status["duplicate_chunks"]) == (rows, 2, 1, 0)
    assert status["recent_return_mean"] == pytest.approx(10.5)
    assert status["buffers"] == [{"buffer_id": "replay-0", "sampler": "uniform", "unit": "transition", "chunks": 1,
                                  "transitions": rows, "items": rows, "capacity_transitions": 2000,
                                  "evicted_chunks": 0, "removed_max_use": 0, "removed_stale": 0, "max_priority": 1.0,
                                  "beta": 1.0, "inserted_transitions": rows, "sampled_transitions": 0,
                                  "samples_per_insert": run_config.replay.samples_per_insert,
                                  "tolerance_transitions": run_config.replay.tolerance_transitions}]
    assert status["policy_lag"]["ingest_histogram"] == {"0": 1}
    tasks = {t["task_id"]: t for t in status["tasks"]}
    assert tasks["collector-0"]["state"] == "claimed" and tasks["collector-0"]["worker_id"] == reg.worker_id

    # a retried report is recognised and counted once
    resp = report_chunk(client, tokens, report)
    assert resp.status_code == 200, resp.text
    assert resp.json()["duplicate"] is True and resp.json()["directive"]["env_steps_total"] == rows
    status = get_status(client, tokens["read"])
    assert (status["env_steps"], status["episodes"], status["chunks"], status["duplicate_chunks"]) == (rows, 2, 1, 1)

    # the same chunk id with other content is a conflict, and changes nothing
    other = write_chunk(store, "collector-0", "chunk-0001", reg.worker_id, seed=99, episodes=((12.0, 12), (9.0, 9)))
    assert other["sha256"] != report["sha256"]
    assert_error_body(report_chunk(client, tokens, other), 409, "conflict", "chunk-0001")
    after = get_status(client, tokens["read"])
    assert (after["env_steps"], after["episodes"], after["chunks"], after["duplicate_chunks"]) == (rows, 2, 1, 1)


def test_each_collector_gets_its_own_task(client: TestClient, tokens: Tokens) -> None:
    first = register(client, tokens["collector"], "collector", "a")
    second = register(client, tokens["collector"], "collector", "b")
    assert first != second
    assert claim(client, tokens["collector"], first)["task"]["task_id"] == "collector-0"
    assert claim(client, tokens["collector"], second)["task"]["task_id"] == "collector-1"
    resp = post(client, tokens["collector"], f"/v1/workers/{second}/heartbeat")
    assert resp.status_code == 200, resp.text
    hb = HeartbeatResponse.model_validate(resp.json())
    assert hb.lease_seconds == 10.0 and hb.directive.run_state == "running"


def test_learner_has_no_claimable_second_task(client: TestClient, tokens: Tokens, run_config: RunConfig) -> None:
    learner = register(client, tokens["learner"], "learner")
    task = claim(client, tokens["learner"], learner)["task"]
    assert task["kind"] == "learner" and task["task_id"] == "learner-0" and task["buffer_id"] == "replay-0"
    assert task["algo"]["name"] == "dqn" and task["algo"]["batch_size"] == run_config.algo.batch_size
    spare = register(client, tokens["learner"], "learner")
    assert claim(client, tokens["learner"], spare)["task"] is None


# ----- learner sampling ----------------------------------------------------------------------------------------
def test_learner_samples_consistent_references_once_warm(
    client: TestClient, tokens: Tokens, store: LocalStore, run_config: RunConfig
) -> None:
    collector = register(client, tokens["collector"], "collector")
    assert claim(client, tokens["collector"], collector)["task"]["task_id"] == "collector-0"
    learner = learner_with_task(client, tokens)
    batch_size, num_batches = run_config.algo.batch_size, run_config.algo.batches_per_request
    request = {"worker_id": learner, "batch_size": batch_size, "num_batches": num_batches}

    resp = post(client, tokens["learner"], "/v1/buffers/replay-0/sample", request)
    assert_error_body(resp, 409, "not_enough_data", "retry")

    rows = run_config.collector.num_envs * run_config.collector.chunk_steps  # 32 per chunk
    sizes = dict.fromkeys(("warm-a", "warm-b", "warm-c"), rows)  # 96 >= min_transitions (64); 32 alone is not
    reports = {}
    for n, chunk_id in enumerate(sizes):
        reports[chunk_id] = write_chunk(store, "collector-0", chunk_id, collector, seed=n)
        assert report_chunk(client, tokens, reports[chunk_id]).status_code == 200
        if n == 0:
            resp = post(client, tokens["learner"], "/v1/buffers/replay-0/sample", request)
            assert_error_body(resp, 409, "not_enough_data", f"needs {run_config.replay.min_transitions}")
    assert get_status(client, tokens["read"])["env_steps"] == sum(sizes.values())

    resp = post(client, tokens["learner"], "/v1/buffers/replay-0/sample", request)
    assert resp.status_code == 200, resp.text
    sample = SampleResponse.model_validate(resp.json())
    assert sample.batch_size == batch_size and sample.buffer_transitions == sum(sizes.values())
    assert len(sample.chunk_index) == len(sample.offsets) == batch_size * num_batches
    assert len({c.chunk_id for c in sample.chunks}) == len(sample.chunks) >= 1
    for chunk in sample.chunks:
        expected = reports[chunk.chunk_id]
        assert (chunk.payload_path, chunk.sha256, chunk.policy_version) == (
            expected["payload_path"], expected["sha256"], expected["policy_version"])
    assert all(0 <= i < len(sample.chunks) for i in sample.chunk_index)
    assert set(sample.chunk_index) == set(range(len(sample.chunks)))  # no chunk listed without a draw
    for i, offset in zip(sample.chunk_index, sample.offsets, strict=True):
        assert 0 <= offset < sizes[sample.chunks[i].chunk_id]
    # the references resolve to real transitions in the store
    arrays, meta = decode_chunk(store.get(sample.chunks[0].payload_path, sha256=sample.chunks[0].sha256))
    assert meta["chunk_id"] == sample.chunks[0].chunk_id
    assert arrays["rewards"].size == sizes[sample.chunks[0].chunk_id]  # steps x envs rows
    assert arrays["rewards"].shape[1] == sample.chunks[0].num_envs == run_config.collector.num_envs

    resp = post(client, tokens["learner"], "/v1/learn-info", {"worker_id": learner, "iteration": 3,
                                                             "transitions_trained": 64,
                                                             "losses": {"td_loss": 0.25, "q_mean": 1.5},
                                                             "hooks_failed": {"hooks:log@every": "KeyError: 'x'"}})
    assert resp.status_code == 200, resp.text
    status = get_status(client, tokens["read"])
    assert status["learner"]["iteration"] == 3 and status["learner"]["transitions_trained"] == 64
    assert status["learner"]["losses"] == {"td_loss": 0.25, "q_mean": 1.5}
    assert status["learner"]["hooks_failed"] == {"hooks:log@every": "KeyError: 'x'"}
    assert "rlfleet_learner_hooks_failed 1.0\n" in client.get("/metrics").text
    assert status["learner"]["samples_per_insert"] == pytest.approx(64 / (96 - 64))


def test_sampling_is_uniform_over_transitions(tmp_path: Path) -> None:
    # chunks cut after one episode or 48 steps of 2 envs: one of 96 rows and one of 32 (16 steps)
    settings, tokens = make_settings(tmp_path, overrides="collector.chunk_steps=48;sampling.n_episode=1")
    with running_client(settings) as client:
        _sample_two_chunk_sizes(client, tokens, store_for(settings))


def _sample_two_chunk_sizes(client: TestClient, tokens: Tokens, store: LocalStore) -> None:
    config = client.app.state.run.ctx.config  # type: ignore[attr-defined]
    collector = register(client, tokens["collector"], "collector")
    claim(client, tokens["collector"], collector)
    learner = learner_with_task(client, tokens)
    for n, steps in enumerate((48, 16)):
        report = write_chunk(store, "collector-0", f"u{n}", collector, steps=steps, seed=n, config=config)
        assert report["env_steps"] == 2 * steps
        assert report_chunk(client, tokens, report).status_code == 200
    resp = post(client, tokens["learner"], "/v1/buffers/replay-0/sample",
                {"worker_id": learner, "batch_size": 256, "num_batches": 2})
    assert resp.status_code == 200, resp.text
    sample = resp.json()
    ids = np.array([sample["chunks"][i]["chunk_id"] for i in sample["chunk_index"]])
    share = float(np.mean(ids == "u0"))  # 96 of 128 transitions: expect 0.75
    assert 0.65 < share < 0.85, share


# ----- policies ------------------------------------------------------------------------------------------------
def test_policy_publish_latest_etag_and_versioning(client: TestClient, tokens: Tokens, store: LocalStore) -> None:
    assert_error_body(client.get("/v1/policies/latest", headers=auth(tokens["read"])), 404, "not_found")
    learner = learner_with_task(client, tokens)
    v1 = write_policy(store, 1)
    resp = publish(client, tokens, learner, v1, iteration=20)
    assert resp.status_code == 200, resp.text
    # (that the publish reply's own directive names v1 is checked in the test below)

    resp = client.get("/v1/policies/latest", headers=auth(tokens["read"]))
    assert resp.status_code == 200 and resp.json() == v1
    assert resp.headers["etag"] == '"v1"'
    resp = client.get("/v1/policies/latest", headers={**auth(tokens["collector"]), "If-None-Match": '"v1"'})
    assert resp.status_code == 304 and resp.content == b"" and resp.headers["etag"] == '"v1"'
    resp = client.get("/v1/policies/latest", headers={**auth(tokens["collector"]), "If-None-Match": '"v0"'})
    assert resp.status_code == 200 and resp.json() == v1

    # republishing the same version and file is a harmless retry
    assert publish(client, tokens, learner, v1, iteration=20).status_code == 200
    # the same version with another file is a conflict
    assert_error_body(publish(client, tokens, learner, {**v1, "sha256": "f" * 64}), 409, "conflict", "not newer")

    v2 = write_policy(store, 2)
    assert publish(client, tokens, learner, v2, iteration=40).status_code == 200
    assert_error_body(publish(client, tokens, learner, v1), 409, "conflict", "not newer")  # lower version
    resp = client.get("/v1/policies/latest", headers={**auth(tokens["read"]), "If-None-Match": '"v1"'})
    assert resp.status_code == 200 and resp.json() == v2 and resp.headers["etag"] == '"v2"'

    status = get_status(client, tokens["read"])
    assert status["policy_version"] == 2 and status["learner"]["iteration"] == 40
    # every worker's directive carries the latest policy, and a collector's task starts from it
    collector = register(client, tokens["collector"], "collector")
    hb = post(client, tokens["collector"], f"/v1/workers/{collector}/heartbeat").json()
    assert hb["directive"]["policy"] == v2
    assert claim(client, tokens["collector"], collector)["task"]["policy"] == v2


def test_publish_reply_names_the_published_policy(client: TestClient, tokens: Tokens, store: LocalStore) -> None:
    learner = learner_with_task(client, tokens)
    v1 = write_policy(store, 1)
    resp = publish(client, tokens, learner, v1, iteration=20)
    assert resp.status_code == 200, resp.text
    assert resp.json()["directive"]["policy"] == v1


def test_old_policy_files_are_pruned(client: TestClient, tokens: Tokens, store: LocalStore) -> None:
    learner = learner_with_task(client, tokens)
    keep = client.app.state.settings.keep_policies
    refs = [write_policy(store, v) for v in range(1, keep + 3)]
    for ref in refs:
        assert publish(client, tokens, learner, ref, iteration=ref["version"]).status_code == 200
    client.app.state.run.ctx.payloads.flush()  # type: ignore[attr-defined]  # files go on the deleter thread
    assert [store.size(r["path"]) is not None for r in refs] == [False, False] + [True] * keep
    assert client.get("/v1/policies/latest", headers=auth(tokens["read"])).json() == refs[-1]


# ----- evaluation, solving, stopping ---------------------------------------------------------------------------
def test_evaluator_reports_and_a_high_mean_solves_the_run(
    client: TestClient, tokens: Tokens, store: LocalStore, run_config: RunConfig
) -> None:
    learner = learner_with_task(client, tokens)
    assert publish(client, tokens, learner, write_policy(store, 1)).status_code == 200
    collector = register(client, tokens["collector"], "collector")
    evaluator = register(client, tokens["evaluator"], "evaluator")
    task = claim(client, tokens["evaluator"], evaluator)["task"]
    assert task["kind"] == "evaluator" and task["task_id"] == "evaluator-0"
    assert task["evaluation"] == run_config.evaluation.model_dump(mode="json")

    resp = post(client, tokens["evaluator"], "/v1/evaluations",
                {"worker_id": evaluator, "policy_version": 1, "returns": [100.0, 120.0, 80.0, 100.0],
                 "lengths": [100, 120, 80, 100]})
    assert resp.status_code == 200, resp.text
    first = resp.json()
    assert first["policy_version"] == 1 and first["mean"] == pytest.approx(100.0) and first["solved"] is False
    assert first["episodes"] == 4 and first["std"] == pytest.approx(np.std([100, 120, 80, 100]))
    assert get_status(client, tokens["read"])["run_state"] == "running"

    returns = [480.0, 490.0, 500.0, 470.0]
    assert np.mean(returns) >= run_config.env.solve_threshold
    resp = post(client, tokens["evaluator"], "/v1/evaluations",
                {"worker_id": evaluator, "policy_version": 1, "returns": returns, "lengths": [480, 490, 500, 470]})
    assert resp.status_code == 200, resp.text
    second = resp.json()
    assert second["solved"] is True and second["mean"] == pytest.approx(485.0) and second["test_requested"] is True
    assert get_status(client, tokens["read"])["test_in_flight"] == 1

    resp = post(client, tokens["evaluator"], "/v1/tests",
                {"worker_id": evaluator, "policy_version": 1, "returns": [480.0] * 100, "lengths": [480] * 100})
    assert resp.status_code == 200, resp.text
    test = resp.json()
    assert test["confirmed"] is True and test["validation_mean"] == pytest.approx(485.0)
    status = get_status(client, tokens["read"])
    assert status["run_state"] == "solved" and "480.0" in status["run_message"]
    assert status["latest_evaluation"] == second and status["best_evaluation"] == second
    assert status["confirmed_by"] == test and status["tests_rejected"] == 0 and status["test_in_flight"] is None
    assert client.get("/v1/tests", headers={"Authorization": f"Bearer {tokens['read']}"}).json() == [test]
    history = client.get("/v1/evaluations", headers=auth(tokens["read"]))
    assert history.status_code == 200 and history.json() == [first, second]

    # every worker is told on its next reply, and no more work is handed out
    for token, worker_id in ((tokens["collector"], collector), (tokens["learner"], learner),
                             (tokens["evaluator"], evaluator)):
        hb = post(client, token, f"/v1/workers/{worker_id}/heartbeat")
        assert hb.status_code == 200 and hb.json()["directive"]["run_state"] == "solved"
        claimed = post(client, token, f"/v1/workers/{worker_id}/claim").json()
        assert claimed["task"] is None and claimed["directive"]["run_state"] == "solved"
    assert client.get("/readyz").json()["run_state"] == "solved"

    # stopping after the fact is accepted but does not rewrite the outcome
    resp = post(client, tokens["admin"], "/v1/run/stop", {"reason": "done"})
    assert resp.status_code == 200, resp.text
    assert Status.model_validate(resp.json()).run_state == "solved"


def test_a_status_long_poll_waits_while_running_and_answers_as_the_run_ends(client: TestClient, tokens: Tokens) -> None:
    """How `rlfleet up` watches a run: it learns of the end within a round trip, not at its next poll."""
    start = time.monotonic()
    held = client.get("/v1/status?wait=0.3", headers=auth(tokens["read"]))
    assert held.status_code == 200 and held.json()["run_state"] == "running"
    assert time.monotonic() - start >= 0.3
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.get, "/v1/status?wait=30", headers=auth(tokens["read"]))
        time.sleep(0.3)
        assert not waiting.done()
        stopped_at = time.monotonic()
        assert post(client, tokens["admin"], "/v1/run/stop", {"reason": "done"}).status_code == 200
        resp = waiting.result(timeout=10)
    assert resp.status_code == 200 and resp.json()["run_state"] == "stopped"
    assert time.monotonic() - stopped_at < 5  # not the 30 s asked for
    again = time.monotonic()
    assert get_status(client, tokens["read"])["run_state"] == "stopped"
    assert client.get("/v1/status?wait=30", headers=auth(tokens["read"])).json()["run_state"] == "stopped"
    assert time.monotonic() - again < 5  # an ended run answers at once
    bad = client.get("/v1/status?wait=-1", headers=auth(tokens["read"]))
    assert_error_body(bad, 422, "invalid")


def test_admin_stops_the_run_and_workers_are_told(client: TestClient, tokens: Tokens) -> None:
    collector = register(client, tokens["collector"], "collector")
    assert claim(client, tokens["collector"], collector)["task"] is not None
    resp = post(client, tokens["admin"], "/v1/run/stop", {"reason": "maintenance window"})
    assert resp.status_code == 200, resp.text
    status = Status.model_validate(resp.json())
    assert status.run_state == "stopped" and status.run_message == "maintenance window"
    assert get_status(client, tokens["read"])["run_state"] == "stopped"
    hb = post(client, tokens["collector"], f"/v1/workers/{collector}/heartbeat")
    assert hb.status_code == 200 and hb.json()["directive"]["run_state"] == "stopped"
    late = register(client, tokens["collector"], "collector")
    claimed = claim(client, tokens["collector"], late)
    assert claimed["task"] is None and claimed["directive"]["run_state"] == "stopped"
    run = client.get("/v1/run", headers=auth(tokens["read"]))
    assert run.status_code == 200 and run.json()["run_state"] == "stopped"


def test_stop_body_reason_defaults(client: TestClient, tokens: Tokens) -> None:
    resp = post(client, tokens["admin"], "/v1/run/stop", {})
    assert resp.status_code == 200, resp.text
    assert resp.json()["run_state"] == "stopped" and resp.json()["run_message"] == "stopped by admin"


def test_run_endpoint_returns_the_resolved_config(client: TestClient, tokens: Tokens, run_config: RunConfig) -> None:
    resp = client.get("/v1/run", headers=auth(tokens["read"]))
    assert resp.status_code == 200
    body = resp.json()
    assert body["run_name"] == run_config.name and body["run_state"] == "running"
    assert RunConfig.model_validate(body["config"]) == run_config


def test_a_restarted_worker_shows_why_its_previous_process_ended(client: TestClient, tokens: Tokens) -> None:
    resp = client.post("/v1/workers", headers=auth(tokens["collector"]), json={
        "kind": "collector", "name": "c1", "restarts": 1, "last_error": "exit 4: crashed: OSError: disk full"})
    assert resp.status_code == 200, resp.text
    (worker,) = client.get("/v1/status", headers=auth(tokens["read"])).json()["workers"]
    assert (worker["restarts"], worker["last_error"]) == (1, "exit 4: crashed: OSError: disk full")
    too_long = client.post("/v1/workers", headers=auth(tokens["collector"]),
                           json={"kind": "collector", "name": "c2", "last_error": "x" * 501})
    assert too_long.status_code == 422


# ----- metrics and OpenAPI -------------------------------------------------------------------------------------
def test_metrics_exposes_the_counters(client: TestClient, tokens: Tokens, store: LocalStore) -> None:
    collector = register(client, tokens["collector"], "collector")
    claim(client, tokens["collector"], collector)
    assert report_chunk(client, tokens, write_chunk(store, "collector-0", "m1", collector)).status_code == 200
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    lines = resp.text.strip().splitlines()
    samples = {k: float(v) for k, v in (line.rsplit(" ", 1) for line in lines if not line.startswith("#"))}
    assert samples["rlfleet_env_steps_total"] == 32
    assert samples["rlfleet_chunks_total"] == 1
    assert samples["rlfleet_episodes_total"] == 1
    assert samples['rlfleet_workers{kind="collector"}'] == 1
    assert samples['rlfleet_buffer_transitions{buffer="replay-0"}'] == 32
    assert samples["rlfleet_run_running"] == 1
    assert samples["rlfleet_chunk_ingest_bytes_count"] == 1
    size = samples["rlfleet_chunk_ingest_bytes_sum"]
    assert samples["rlfleet_payload_bytes_total"] == size and samples["rlfleet_payload_bytes_per_env_step"] == size / 32
    assert samples['rlfleet_policy_lag_versions_bucket{le="0.0"}'] == 1
    route = 'method="POST",route="/v1/chunks",status="200"'
    assert samples[f"rlfleet_http_request_duration_seconds_count{{{route}}}"] == 1  # the template, not the path
    for name in ("rlfleet_env_steps_total", "rlfleet_http_request_duration_seconds", "rlfleet_sample_wait_seconds",
                 "rlfleet_policy_propagation_seconds", "rlfleet_policy_lag_versions"):
        assert any(line.startswith(f"# HELP {name} ") for line in lines), name
        assert any(line.startswith(f"# TYPE {name} ") for line in lines), name
    assert all(float(v) == float(v) for v in samples.values())  # every value parses, none is NaN


def test_openapi_documents_every_route_with_schemas_and_bearer_auth(client: TestClient) -> None:
    resp = client.get("/openapi.json")
    assert resp.status_code == 200
    spec = resp.json()
    schemes = spec["components"]["securitySchemes"]
    bearer = [name for name, s in schemes.items() if s.get("type") == "http" and s.get("scheme") == "bearer"]
    assert bearer, schemes
    schemas = spec["components"]["schemas"]
    routes = [(m, p) for m, p in app_routes(client.app) if p not in {"/docs", "/redoc", "/openapi.json",
                                                                       "/docs/oauth2-redirect"}]
    assert len(routes) >= 16
    for method, path in routes:
        assert path in spec["paths"] and method.lower() in spec["paths"][path], (method, path)
        op = spec["paths"][path][method.lower()]
        ok = op["responses"]["200"]["content"]
        if path != "/metrics":
            schema = ok["application/json"]["schema"]
            assert "$ref" in schema or "type" in schema, (method, path, schema)
        if path in PUBLIC_PATHS:
            assert not op.get("security"), (method, path)
        else:
            assert any(name in req for req in op.get("security", []) for name in bearer), (method, path)
            ref = op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorBody"), (method, path)  # the rest per route: test_openapi_docs.py
        if method in ("POST", "PATCH") and not path.endswith(("/heartbeat", "/claim", "/pause", "/resume",
                                                               "/checkpoint")):  # commands without a body
            body_schema = op["requestBody"]["content"]["application/json"]["schema"]
            name = body_schema["$ref"].rsplit("/", 1)[-1]
            assert name in schemas and schemas[name].get("additionalProperties") is False, (path, name)
    assert set(schemas["ErrorBody"]["required"]) == {"error", "message"}
    assert "304" in spec["paths"]["/v1/policies/latest"]["get"]["responses"]


def test_openapi_documents_metrics_as_text(client: TestClient) -> None:
    content = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert "text/plain" in content and "application/json" not in content
