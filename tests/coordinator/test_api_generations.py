"""The generations routes through the real app: the population protocol of an ES run end to end, its counters
in /v1/status, late and duplicate reports, refusals naming the field, and a restart keeping what was acknowledged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from coordinator.settings import CoordinatorSettings
from shared.config import RunConfig, dump_run_config
from shared.seeds import population_seed
from tests.coordinator.helpers import (
    assert_error_body,
    auth,
    claim,
    get_status,
    make_settings,
    register,
    running_client,
    store_for,
    write_policy,
)

Tokens = dict[str, str]
POPULATION = 4
CARTPOLE_PARAMETERS = 4 * 16 + 16 + 16 * 2 + 2  # ES's default net on CartPole
NOISE_SIZE = 4096
PERTURBATION = {"noise_seed": 1234, "noise_size": NOISE_SIZE, "sigma": 0.1, "episodes": 2, "lease_seconds": 30.0}


def es_settings(base: Path) -> tuple[CoordinatorSettings, Tokens]:
    config = RunConfig.model_validate({
        "name": "test-run", "seed": 5, "env": {"id": "CartPole-v1"},
        "algo": {"name": "es", "population": POPULATION, "noise_table_size": NOISE_SIZE},
        "evaluation": {"episodes": 4, "num_envs": 2},
        "budget": {"max_env_steps": 1_000_000, "max_wall_seconds": 600}})
    config_file = base / "es.yaml"
    base.mkdir(parents=True, exist_ok=True)
    config_file.write_text(dump_run_config(config))
    return make_settings(base, config=config_file)


def post(client: TestClient, token: str, path: str, body: Any) -> Any:
    return client.post(path, json=body, headers=auth(token))


def members(count: int = POPULATION, first: int = 0) -> list[dict[str, int]]:
    return [{"noise_index": first + 7 * (k // 2), "sign": 1 if k % 2 == 0 else -1} for k in range(count)]


def open_body(learner: str, request_id: str = "gen-1", version: int = 1, **update: Any) -> dict[str, Any]:
    return {"worker_id": learner, "request_id": request_id, "policy_version": version,
            "perturbation": PERTURBATION, "members": members(), **update}


def result_body(collector: str, member: int, ret: float, steps: int = 20) -> dict[str, Any]:
    return {"worker_id": collector, "member": member, "mean_return": ret, "mean_length": steps / 2, "episodes": 2,
            "env_steps": steps}


def learner_with_policy(client: TestClient, tokens: Tokens, settings: CoordinatorSettings, version: int = 1) -> str:
    learner = register(client, tokens["learner"], "learner")
    claim(client, tokens["learner"], learner)
    for v in range(1, version + 1):
        policy = write_policy(store_for(settings), v)  # the coordinator hands the reference on, never reads it
        resp = post(client, tokens["learner"], "/v1/policies", {"worker_id": learner, "policy": policy,
                                                                 "iteration": v})
        assert resp.status_code == 200, resp.text
    return learner


def claim_member(client: TestClient, tokens: Tokens, collector: str) -> Any:
    """The claimed MemberTask as a dict, or None."""
    resp = post(client, tokens["collector"], "/v1/generations/claim", {"worker_id": collector})
    assert resp.status_code == 200, resp.text
    return resp.json()["member"]


def test_population_protocol_end_to_end(tmp_path: Path) -> None:
    settings, tokens = es_settings(tmp_path)
    with running_client(settings) as client:
        learner = learner_with_policy(client, tokens, settings)
        status = get_status(client, tokens["read"])
        assert status["population"]["generation"] == 0 and not status["population"]["open"]

        resp = post(client, tokens["learner"], "/v1/generations", open_body(learner))
        assert resp.status_code == 200, resp.text
        assert (resp.json()["generation"], resp.json()["population"]) == (1, POPULATION)
        retry = post(client, tokens["learner"], "/v1/generations", open_body(learner))
        assert retry.json()["generation"] == 1  # same request id: the same generation

        collector = register(client, tokens["collector"], "collector")
        tasks = [claim_member(client, tokens, collector) for _ in range(POPULATION)]
        assert [t["member"] for t in tasks] == list(range(POPULATION))
        assert claim_member(client, tokens, collector) is None  # all leased
        first = tasks[0]
        assert (first["generation"], first["policy"]["version"], first["noise_index"], first["sign"]) == (1, 1, 0, 1)
        assert first["perturbation"] == {**PERTURBATION, "max_steps": None}
        assert {t["seed"] for t in tasks} == {population_seed(5, 1)}  # common random numbers, the run's seed 5
        status = get_status(client, tokens["read"])["population"]
        assert (status["generation"], status["open"], status["population"], status["claimed"]) == (1, True, 4, 4)

        for member, ret in [(0, 10.0), (1, 30.0), (2, 20.0)]:
            ack = post(client, tokens["collector"], "/v1/generations/1/results", result_body(collector, member, ret))
            assert ack.status_code == 200, ack.text
            assert (ack.json()["accepted"], ack.json()["duplicate"], ack.json()["late"]) == (True, False, False)
        dup = post(client, tokens["collector"], "/v1/generations/1/results", result_body(collector, 0, 99.0))
        assert (dup.json()["accepted"], dup.json()["duplicate"]) == (False, True)

        not_yet = post(client, tokens["learner"], "/v1/generations/1/close",
                       {"worker_id": learner, "min_fraction": 1.0})
        assert not_yet.status_code == 200 and not not_yet.json()["closed"] and not_yet.json()["results"] == []
        closed = post(client, tokens["learner"], "/v1/generations/1/close",
                      {"worker_id": learner, "min_fraction": 0.75})
        body = closed.json()
        assert body["closed"] and (body["population"], body["received"]) == (4, 3)
        assert [(r["member"], r["noise_index"], r["sign"], r["mean_return"]) for r in body["results"]] == [
            (0, 0, 1, 10.0), (1, 0, -1, 30.0), (2, 7, 1, 20.0)]

        late = post(client, tokens["collector"], "/v1/generations/1/results", result_body(collector, 3, 5.0))
        assert late.status_code == 200, late.text
        assert (late.json()["accepted"], late.json()["late"]) == (False, True)
        again = post(client, tokens["learner"], "/v1/generations/1/close",
                     {"worker_id": learner, "min_fraction": 0.75})
        assert again.json()["results"] == body["results"] and again.json()["late_results"] == 1

        status = get_status(client, tokens["read"])
        assert status["env_steps"] == 4 * 20  # three accepted and one late report; never the duplicate
        population = status["population"]
        assert (population["open"], population["received"], population["generations_closed"]) == (False, 3, 1)
        assert (population["results_accepted"], population["late_results"], population["duplicate_results"]) == (
            3, 1, 1)
        assert population["last_fraction"] == 0.75


def test_bad_input_names_the_field(tmp_path: Path) -> None:
    settings, tokens = es_settings(tmp_path)
    with running_client(settings) as client:
        learner = learner_with_policy(client, tokens, settings, version=2)
        offsets = NOISE_SIZE - CARTPOLE_PARAMETERS + 1
        resp = post(client, tokens["learner"], "/v1/generations",
                    open_body(learner, members=[*members(2), {"noise_index": offsets, "sign": 1}]))
        assert_error_body(resp, 422, "invalid", f"members[2].noise_index {offsets}")
        resp = post(client, tokens["learner"], "/v1/generations", open_body(learner, version=1))
        assert_error_body(resp, 409, "conflict", "latest published policy (v2), not v1")
        resp = post(client, tokens["learner"], "/v1/generations",
                    open_body(learner, version=2, members=members(2, first=offsets - 1)))
        assert resp.status_code == 200, resp.text  # the last offset that fits

        collector = register(client, tokens["collector"], "collector")
        resp = post(client, tokens["collector"], "/v1/generations/1/results", result_body(collector, 2, 1.0))
        assert_error_body(resp, 422, "invalid", "member 2 does not exist")
        resp = post(client, tokens["collector"], "/v1/generations/2/results", result_body(collector, 0, 1.0))
        assert_error_body(resp, 422, "invalid", "generation 2 does not exist yet")
        resp = post(client, tokens["learner"], "/v1/generations/2/close", {"worker_id": learner, "min_fraction": 1})
        assert_error_body(resp, 422, "invalid", "generation 2")
        resp = post(client, tokens["collector"], "/v1/generations/1/results",
                    {**result_body(collector, 0, 1.0), "env_steps": 0})
        assert_error_body(resp, 422, hint="env_steps")
        resp = post(client, tokens["collector"], "/v1/generations/claim", {"worker_id": learner})
        assert_error_body(resp, 403, "forbidden", "cannot act for learner")  # members go to collectors only
        assert get_status(client, tokens["read"])["env_steps"] == 0


def test_generation_routes_conflict_in_a_run_that_trains_from_chunks(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path)  # DQN
    with running_client(settings) as client:
        learner = learner_with_policy(client, tokens, settings)
        collector = register(client, tokens["collector"], "collector")
        for token, path, body in [
            (tokens["learner"], "/v1/generations", open_body(learner)),
            (tokens["collector"], "/v1/generations/claim", {"worker_id": collector}),
            (tokens["collector"], "/v1/generations/1/results", result_body(collector, 0, 1.0)),
            (tokens["learner"], "/v1/generations/1/close", {"worker_id": learner, "min_fraction": 1.0}),
        ]:
            assert_error_body(post(client, token, path, body), 409, "conflict", "trains from chunks")
        assert get_status(client, tokens["read"])["population"] is None


def test_a_restarted_coordinator_keeps_acknowledged_results(tmp_path: Path) -> None:
    settings, tokens = es_settings(tmp_path)
    with running_client(settings) as client:
        learner = learner_with_policy(client, tokens, settings)
        assert post(client, tokens["learner"], "/v1/generations", open_body(learner)).status_code == 200
        collector = register(client, tokens["collector"], "collector")
        claim_member(client, tokens, collector)
        ack = post(client, tokens["collector"], "/v1/generations/1/results", result_body(collector, 0, 42.0))
        assert ack.json()["accepted"]
    with running_client(settings) as client:
        status = get_status(client, tokens["read"])
        assert status["env_steps"] == 20
        assert (status["population"]["generation"], status["population"]["received"]) == (1, 1)
        dup = post(client, tokens["collector"], "/v1/generations/1/results", result_body(collector, 0, 1.0))
        assert dup.status_code == 200 and dup.json()["duplicate"], dup.text
        assert claim_member(client, tokens, collector)["member"] == 1
        resp = post(client, tokens["learner"], "/v1/generations/1/close",
                    {"worker_id": learner, "min_fraction": 1.0, "force": True})
        assert resp.status_code == 200, resp.text
        assert [(r["member"], r["mean_return"]) for r in resp.json()["results"]] == [(0, 42.0)]
