"""The generation routes through the real app: the whole protocol of an ES run, its bad input, and a restart
that keeps an acknowledged result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.storage.local import LocalStore
from tests.support.api import assert_error_body, auth, claim, get_status, make_settings, register, running_client
from tests.support.chunks import write_policy

ES_RUN = RunConfig.model_validate({"name": "es-api", "env": {"id": "CartPole-v1"},
                                   "algo": {"name": "es", "population": 4, "noise_table_size": 4096}})
PERTURBATION = {"noise_seed": 1, "noise_size": 4096, "sigma": 0.1, "episodes": 2, "lease_seconds": 30.0}
MEMBERS = [{"noise_index": 7, "sign": 1}, {"noise_index": 7, "sign": -1},
           {"noise_index": 99, "sign": 1}, {"noise_index": 99, "sign": -1}]


class World:
    def __init__(self, base: Path) -> None:
        config_file = base / "es.yaml"
        base.mkdir(parents=True, exist_ok=True)
        config_file.write_text(dump_run_config(ES_RUN))
        self.settings, self.tokens = make_settings(base, config=config_file, run=ES_RUN.name)
        self.store = LocalStore(self.settings.data_dir / "runs" / ES_RUN.name / "store")

    def start(self, client: TestClient) -> None:
        self.client = client
        self.learner = register(client, self.tokens["learner"], "learner")
        claim(client, self.tokens["learner"], self.learner)
        self.collector = register(client, self.tokens["collector"], "collector")
        task = claim(client, self.tokens["collector"], self.collector)["task"]
        assert task["work"] == "members"  # an ES run's collectors evaluate members instead of writing chunks
        self.publish(1)

    def publish(self, version: int) -> None:
        resp = self.client.post("/v1/policies", json={"worker_id": self.learner, "iteration": version,
                                                      "policy": write_policy(self.store, version)},
                                headers=auth(self.tokens["learner"]))
        assert resp.status_code == 200, resp.text

    def post(self, path: str, body: dict[str, Any], scope: str) -> Any:
        return self.client.post(path, json=body, headers=auth(self.tokens[scope]))

    def open(self, request_id: str = "a" * 32, **update: Any) -> Any:
        body = {"worker_id": self.learner, "request_id": request_id, "policy_version": 1,
                "perturbation": PERTURBATION, "members": MEMBERS} | update
        return self.post("/v1/generations", body, "learner")

    def claim_member(self) -> Any:
        return self.post("/v1/generations/claim", {"worker_id": self.collector}, "collector")

    def report(self, generation: int, member: int, ret: float = 20.0) -> Any:
        return self.post(f"/v1/generations/{generation}/results", {
            "worker_id": self.collector, "member": member, "mean_return": ret, "mean_length": ret / 2,
            "episodes": 2, "env_steps": int(ret)}, "collector")

    def close(self, generation: int, **update: Any) -> Any:
        return self.post(f"/v1/generations/{generation}/close",
                         {"worker_id": self.learner, "min_fraction": 0.75} | update, "learner")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    with running_client(w.settings) as client:
        w.start(client)
        yield w


def test_a_generation_from_open_to_results(world: World) -> None:
    opened = world.open()
    assert opened.status_code == 200 and opened.json()["generation"] == 1 and opened.json()["population"] == 4
    claimed = [world.claim_member().json()["member"] for _ in range(4)]
    assert [m["member"] for m in claimed] == [0, 1, 2, 3]
    first = claimed[0]
    assert first["policy"]["version"] == 1 and first["noise_index"] == 7 and first["sign"] == 1
    assert len({m["seed"] for m in claimed}) == 1  # every member plays the generation's seeds
    assert world.claim_member().json()["member"] is None  # all leased
    not_yet = world.close(1)
    assert not_yet.status_code == 200 and not not_yet.json()["closed"] and not_yet.json()["results"] == []
    for member, ret in ((0, 30.0), (1, 10.0), (2, 50.0)):
        ack = world.report(1, member, ret).json()
        assert ack["accepted"] and not ack["late"] and not ack["duplicate"]
    closed = world.close(1).json()
    assert closed["closed"] and closed["received"] == 3
    assert [(r["member"], r["mean_return"], r["sign"]) for r in closed["results"]] == [
        (0, 30.0, 1), (1, 10.0, -1), (2, 50.0, 1)]
    late = world.report(1, 3, 40.0).json()
    assert late["late"] and not late["accepted"]
    status = get_status(world.client, world.tokens["read"])
    assert status["env_steps"] == 30 + 10 + 50 + 40  # a late result's env steps were spent all the same
    assert status["chunks"] == 0
    population = status["population"]
    assert population["generation"] == 1 and not population["open"] and population["late_results"] == 1
    assert population["results_accepted"] == 3 and population["last_fraction"] == 0.75
    metrics = world.client.get("/metrics").text
    assert "rlfleet_member_results_total 3.0" in metrics and "rlfleet_member_results_late_total 1.0" in metrics


def test_a_repeated_report_is_a_duplicate_that_changes_nothing(world: World) -> None:
    world.open()
    world.claim_member()
    assert world.report(1, 0, 30.0).json()["accepted"]
    before = get_status(world.client, world.tokens["read"])
    again = world.report(1, 0, 30.0)
    assert again.status_code == 200 and again.json()["duplicate"]
    after = get_status(world.client, world.tokens["read"])
    assert after["env_steps"] == before["env_steps"] == 30


def test_a_result_from_a_worker_not_holding_the_member_is_refused_and_changes_nothing(world: World) -> None:
    world.open()
    world.claim_member()  # member 0, held by the world's collector
    other = register(world.client, world.tokens["collector"], "collector")
    claim(world.client, world.tokens["collector"], other)
    for member in (0, 1):  # held by another worker; claimed by nobody
        resp = world.post("/v1/generations/1/results", {
            "worker_id": other, "member": member, "mean_return": 500.0, "mean_length": 250.0, "episodes": 2,
            "env_steps": 500}, "collector")
        assert_error_body(resp, 409, "member_not_held", hint="claim a member")
    status = get_status(world.client, world.tokens["read"])
    assert status["env_steps"] == 0 and status["population"]["received"] == 0
    assert world.report(1, 0, 30.0).json()["accepted"]  # the claimant's result is taken


def test_a_result_for_a_generation_closed_before_the_last_is_refused_every_time(world: World) -> None:
    world.open()
    assert world.claim_member().json()["member"]["member"] == 0
    for generation in (1, 2):  # generation 1 closes when 2 opens, 2 when 3 opens
        world.close(generation, force=True)
        world.open(request_id=str(generation + 1) * 32)
    for _ in range(2):  # a retry must not count again: neither try is counted
        assert_error_body(world.report(1, 0, 40.0), 409, "member_not_held", hint="closed before the last")
    status = get_status(world.client, world.tokens["read"])
    assert status["env_steps"] == 0 and status["population"]["late_results"] == 0


def test_a_retried_open_gets_the_same_generation(world: World) -> None:
    assert world.open().json()["generation"] == 1
    assert world.open().json()["generation"] == 1
    assert world.open(request_id="b" * 32).json()["generation"] == 2


@pytest.mark.parametrize(("update", "error", "hint"), [
    ({"members": [{"noise_index": 4096 - 10, "sign": 1}, {"noise_index": 0, "sign": -1}]}, "invalid", "noise_index"),
    ({"policy_version": 2}, "conflict", "latest published policy"),
    ({"members": [{"noise_index": 1, "sign": 2}]}, "invalid", "sign"),
    ({"members": []}, "invalid", "members"),
])
def test_bad_opens_are_refused_naming_the_problem(world: World, update: dict[str, Any], error: str,
                                                  hint: str) -> None:
    resp = world.open(**update)
    assert_error_body(resp, 409 if error == "conflict" else 422, error, hint=hint)


def test_reports_for_generations_or_members_that_do_not_exist_are_refused(world: World) -> None:
    world.open()
    assert_error_body(world.report(2, 0), 422, "invalid", hint="does not exist yet")
    assert_error_body(world.report(1, 4), 422, "invalid", hint="member 4")
    assert_error_body(world.close(5), 422, "invalid", hint="does not exist yet")
    assert get_status(world.client, world.tokens["read"])["env_steps"] == 0


def test_generation_routes_in_a_run_of_another_algorithm_are_conflicts(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path)  # the DQN run of the other coordinator tests
    with running_client(settings) as client:
        collector = register(client, tokens["collector"], "collector")
        assert claim(client, tokens["collector"], collector)["task"]["work"] == "chunks"
        learner = register(client, tokens["learner"], "learner")
        claim(client, tokens["learner"], learner)
        for path, body, scope in [
            ("/v1/generations/claim", {"worker_id": collector}, "collector"),
            ("/v1/generations", {"worker_id": learner, "request_id": "a" * 32, "policy_version": 1,
                                 "perturbation": PERTURBATION, "members": MEMBERS}, "learner"),
            ("/v1/generations/1/results", {"worker_id": collector, "member": 0, "mean_return": 1.0,
                                           "mean_length": 1.0, "episodes": 1, "env_steps": 1}, "collector"),
            ("/v1/generations/1/close", {"worker_id": learner, "min_fraction": 1.0}, "learner"),
        ]:
            resp = client.post(path, json=body, headers=auth(tokens[scope]))
            assert_error_body(resp, 409, "conflict", hint="not from generations")
        assert get_status(client, tokens["read"])["population"] is None
        metrics = client.get("/metrics").text  # the population's series, at 0: dashboards keep them in every run
        assert "rlfleet_member_results_total 0.0" in metrics and "rlfleet_generations_closed_total 0.0" in metrics


def test_an_acknowledged_result_survives_a_coordinator_restart(tmp_path: Path) -> None:
    world = World(tmp_path)
    with running_client(world.settings) as client:
        world.start(client)
        world.open()
        assert [world.claim_member().json()["member"]["member"] for _ in range(2)] == [0, 1]
        assert world.report(1, 0, 60.0).json()["accepted"]
    with running_client(world.settings) as client:
        world.client = client
        status = get_status(client, world.tokens["read"])
        assert status["env_steps"] == 60 and status["population"]["received"] == 1
        assert world.report(1, 0, 60.0).json()["duplicate"]
        # claims are journalled: member 1, leased before the restart, stays with its claimant, which reports it
        assert world.claim_member().json()["member"]["member"] == 2
        assert world.report(1, 1, 30.0).json()["accepted"]


def test_the_last_offset_that_leaves_room_for_the_policy_is_taken(world: World) -> None:
    parameters = 4 * 16 + 16 + 16 * 2 + 2  # ES's default net on CartPole
    last = PERTURBATION["noise_size"] - parameters
    pair = [{"noise_index": last, "sign": 1}, {"noise_index": last, "sign": -1}]
    assert_error_body(world.open(members=[{"noise_index": last + 1, "sign": 1}, *pair]), 422, "invalid",
                      hint=f"members[0].noise_index {last + 1}")
    assert world.open(members=pair).json()["population"] == 2


def test_members_go_to_collectors_only(world: World) -> None:
    world.open()
    resp = world.post("/v1/generations/claim", {"worker_id": world.learner}, "collector")
    assert_error_body(resp, 403, "forbidden", hint="cannot act for learner")
    resp = world.post("/v1/generations/claim", {"worker_id": world.collector}, "learner")
    assert resp.status_code == 403, resp.text
    assert get_status(world.client, world.tokens["read"])["population"]["claimed"] == 0
