"""The control plane over HTTP: pause and resume, checkpoint and evaluate now, live settings, and bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.api import (
    assert_error_body,
    auth,
    claim,
    get_status,
    make_settings,
    register,
    running_client,
    store_for,
)
from tests.support.chunks import write_policy


class Operator:
    def __init__(self, client: TestClient, tokens: dict[str, str]) -> None:
        self.client, self.tokens = client, tokens

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, scope: str = "admin") -> Any:
        return self.client.request(method, f"/v1/run/{path}", json=body, headers=auth(self.tokens[scope]))

    def directive(self, kind: str) -> dict[str, Any]:
        worker = register(self.client, self.tokens[kind], kind)
        return claim(self.client, self.tokens[kind], worker)["directive"]

    def control(self) -> dict[str, Any]:
        return get_status(self.client, self.tokens["read"])["control"]


@pytest.fixture
def op(tmp_path: Path) -> Any:
    settings, tokens = make_settings(tmp_path)
    with running_client(settings) as client:
        yield Operator(client, tokens)


def test_pause_idles_collectors_until_resumed_and_status_shows_it(op: Operator) -> None:
    assert op.directive("collector")["pause_seconds"] == 0
    assert op.call("POST", "pause").json()["paused"] is True
    assert op.directive("collector")["pause_seconds"] > 0 and op.control()["paused"] is True
    assert op.directive("learner")["pause_seconds"] == 0  # collection only
    assert op.call("POST", "resume").json()["paused"] is False
    assert op.directive("collector")["pause_seconds"] == 0


def test_checkpoint_and_evaluate_requests_are_counters_every_worker_sees(op: Operator) -> None:
    op.call("POST", "checkpoint")
    op.call("POST", "checkpoint")
    op.call("POST", "evaluate", {"test": False})
    directive = op.directive("learner")
    assert (directive["checkpoints"], directive["evaluations"]) == (2, 1)
    control = op.control()
    assert (control["checkpoints"], control["evaluations"], control["tests"]) == (2, 1, 0)
    assert control["reproducible"] is True  # commands change no setting


def test_evaluate_with_test_asks_for_the_held_out_test_whatever_the_validation(op: Operator, tmp_path: Path) -> None:
    learner = register(op.client, op.tokens["learner"], "learner")
    claim(op.client, op.tokens["learner"], learner)
    policy = write_policy(store_for(make_settings(tmp_path)[0]), 1)
    assert op.client.post("/v1/policies", json={"worker_id": learner, "iteration": 1, "policy": policy},
                          headers=auth(op.tokens["learner"])).status_code == 200
    evaluator = register(op.client, op.tokens["evaluator"], "evaluator")
    low = {"worker_id": evaluator, "policy_version": 1, "returns": [1.0] * 4, "lengths": [1] * 4}
    first = op.client.post("/v1/evaluations", json=low, headers=auth(op.tokens["evaluator"])).json()
    assert first["test_requested"] is False  # far below the threshold
    op.call("POST", "evaluate", {"test": True})
    second = op.client.post("/v1/evaluations", json=low, headers=auth(op.tokens["evaluator"])).json()
    assert second["test_requested"] is True
    third = op.client.post("/v1/evaluations", json=low, headers=auth(op.tokens["evaluator"])).json()
    assert third["test_requested"] is False  # once per request
    assert op.control()["tests"] == 1


def test_live_settings_change_the_run_are_journalled_and_survive_a_restart(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path)
    with running_client(settings) as client:
        op = Operator(client, tokens)
        resp = op.call("PATCH", "settings", {"settings": {"replay.samples_per_insert": 2.5,
                                                          "collector.epsilon.end": 0.2}})
        assert resp.status_code == 200, resp.text
        change = {c["key"]: (c["old"], c["new"]) for c in resp.json()["changes"]}
        assert change == {"replay.samples_per_insert": (8.0, 2.5), "collector.epsilon.end": (0.04, 0.2)}
        assert resp.json()["reproducible"] is False
        task = claim(client, tokens["collector"], register(client, tokens["collector"], "collector"))
        assert task["task"]["behaviour"]["epsilon"]["end"] == 0.2 and task["directive"]["settings"] == 2
    with running_client(settings) as client:  # a restarted coordinator resumes the changed run
        op = Operator(client, tokens)
        assert [c["key"] for c in op.control()["changes"]] == ["replay.samples_per_insert", "collector.epsilon.end"]
        config = client.get("/v1/run", headers=auth(tokens["read"])).json()["config"]
        assert config["replay"]["samples_per_insert"] == 2.5


@pytest.mark.parametrize(("settings", "status", "error", "hint"), [
    ({"replay.samples_per_insert": -1}, 422, "invalid", "replay.samples_per_insert"),
    ({"evaluation.every_versions": 0}, 422, "invalid", "greater than or equal to 1"),
    ({"replay.capacity_transitions": 10}, 409, "conflict", "live settings"),
    ({"no.such.key": 1}, 409, "conflict", "evaluation.every_versions"),
])
def test_bad_setting_changes_are_refused_and_change_nothing(op: Operator, settings: dict[str, Any], status: int,
                                                            error: str, hint: str) -> None:
    assert_error_body(op.call("PATCH", "settings", {"settings": settings}), status, error, hint=hint)
    assert op.control()["changes"] == [] and op.control()["reproducible"] is True


def test_control_needs_the_admin_scope_and_a_running_run(op: Operator) -> None:
    for scope in ("collector", "learner", "evaluator", "read"):
        assert_error_body(op.call("POST", "pause", scope=scope), 403, "forbidden")
    assert op.call("POST", "stop", {"reason": "done"}).status_code == 200
    assert_error_body(op.call("POST", "checkpoint"), 409, "conflict", hint="ended")
