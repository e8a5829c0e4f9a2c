"""Auth matrix over every route of the real app x every credential, plus the cross-kind and open_reads rules."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.tokens import SCOPES
from tests.support.api import (
    EXPECTED,
    PUBLIC_PATHS,
    app_routes,
    assert_error_body,
    auth,
    claim,
    enumerate_routes,
    make_settings,
    register,
    running_client,
    store_for,
)
from tests.support.chunks import write_chunk, write_policy

CREDENTIALS = (*SCOPES, "none", "wrong")
WRONG_TOKEN = "not-a-token-of-this-coordinator-0123456789"


def _protected_routes() -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        routes = enumerate_routes(Path(tmp))
    return [r for r in routes if r[1] not in PUBLIC_PATHS]


PROTECTED_ROUTES = _protected_routes()


# ----- a module-wide coordinator with one worker of each kind, each holding its task -------------------------
class World:
    def __init__(self, client: TestClient, tokens: dict[str, str], settings: CoordinatorSettings) -> None:
        self.client = client
        self.tokens = tokens
        self.store = store_for(settings)
        self.workers = {kind: register(client, tokens["admin"], kind) for kind in ("collector", "learner", "evaluator")}
        for worker_id in self.workers.values():
            claim(client, tokens["admin"], worker_id)
        self.policy = write_policy(self.store, 1)
        self._chunks = itertools.count()

    def worker_for(self, cred: str) -> str:
        """A worker id the credential is entitled to act for (a collector's for non-worker credentials)."""
        return self.workers.get(cred, self.workers["collector"])

    def headers(self, cred: str) -> dict[str, str]:
        if cred == "none":
            return {}
        if cred == "wrong":
            return auth(WRONG_TOKEN)
        return auth(self.tokens[cred])

    def next_chunk(self) -> dict[str, Any]:
        n = next(self._chunks)
        return write_chunk(self.store, "collector-0", f"auth-chunk-{n}", self.workers["collector"], seed=n)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    settings, tokens = make_settings(tmp_path_factory.mktemp("auth"), lease_seconds=3600.0)
    with running_client(settings) as client:
        yield World(client, tokens, settings)


def _request(world: World, method: str, path: str, cred: str,
             headers: list[tuple[str, str]] | None = None) -> Any:
    """A request to `path` that is valid for `cred` in every respect but (possibly) its authorization (`cred`'s
    token, or `headers` where given)."""
    kind = cred if cred in ("collector", "learner", "evaluator") else "collector"
    worker_id = world.worker_for(cred)
    bodies: dict[str, Callable[[], dict[str, Any] | None]] = {
        "/v1/workers": lambda: {"kind": kind, "name": "auth-host"},
        "/v1/workers/{worker_id}/heartbeat": lambda: None,
        "/v1/workers/{worker_id}/claim": lambda: None,
        "/v1/chunks": world.next_chunk,
        "/v1/chunk-batches": lambda: {"reports": [world.next_chunk()]},
        "/v1/buffers/{buffer_id}/corrupt": lambda: {"worker_id": world.workers["learner"], "chunk_id": "gone",
                                                    "reason": "auth matrix"},
        "/v1/buffers/{buffer_id}/sample": lambda: {"worker_id": world.workers["learner"], "batch_size": 4},
        "/v1/buffers/{buffer_id}/priorities": lambda: {"worker_id": world.workers["learner"], "ids": [0],
                                                       "priorities": [1.0]},
        "/v1/learn-info": lambda: {"worker_id": world.workers["learner"], "iteration": 1, "transitions_trained": 0,
                                   "losses": {"td_loss": 0.5}},
        # A DQN run: the generation routes answer 409 conflict to every entitled caller, and 401/403 before that.
        "/v1/generations": lambda: {"worker_id": world.workers["learner"], "request_id": "a" * 32,
                                    "policy_version": 1, "perturbation": {"noise_seed": 1, "noise_size": 4096,
                                                                          "sigma": 0.1, "episodes": 1},
                                    "members": [{"noise_index": 0, "sign": 1}, {"noise_index": 0, "sign": -1}]},
        "/v1/datasets/{name}/sample": lambda: {"worker_id": world.workers["learner"], "batch_size": 4},
        "/v1/generations/claim": lambda: {"worker_id": world.workers["collector"]},
        "/v1/generations/{generation}/results": lambda: {"worker_id": world.workers["collector"], "member": 0,
                                                         "mean_return": 10.0, "mean_length": 10.0, "episodes": 1,
                                                         "env_steps": 10},
        "/v1/generations/{generation}/close": lambda: {"worker_id": world.workers["learner"], "min_fraction": 0.5},
        "/v1/policies": lambda: {"worker_id": world.workers["learner"], "policy": world.policy, "iteration": 1},
        "/v1/evaluations": lambda: {"worker_id": world.workers["evaluator"], "policy_version": 1,
                                    "returns": [10.0, 12.0, 14.0, 16.0], "lengths": [10, 12, 14, 16]},
        "/v1/tests": lambda: {"worker_id": world.workers["evaluator"], "policy_version": 1,
                              "returns": [10.0] * 4, "lengths": [10] * 4},
        "/v1/run/stop": lambda: {"reason": "auth matrix"},
        "/v1/run/pause": lambda: None,
        "/v1/run/resume": lambda: None,
        "/v1/run/checkpoint": lambda: None,
        "/v1/run/evaluate": lambda: {"test": False},
        "/v1/run/settings": lambda: {"settings": {"evaluation.every_versions": 2}},
        "/v1/run/load-checkpoint": lambda: {"request_id": "load-1", "source": "/nonexistent/runs/other"},
    }
    url = path.replace("{worker_id}", worker_id).replace("{buffer_id}", "replay-0").replace(
        "{generation}", "1").replace("{name}", "demo")
    body = bodies[path]() if method in ("POST", "PATCH") else None
    return world.client.request(method, url, json=body, headers=world.headers(cred) if headers is None else headers)


def test_auth_table_covers_exactly_the_apps_routes() -> None:
    """A new route must get an explicit row here; a removed one must lose it."""
    assert set(PROTECTED_ROUTES) == set(EXPECTED)
    assert len(PROTECTED_ROUTES) >= 13


@pytest.mark.parametrize("cred", CREDENTIALS)
@pytest.mark.parametrize(("method", "path"), PROTECTED_ROUTES, ids=[f"{m} {p}" for m, p in PROTECTED_ROUTES])
def test_auth_matrix(world: World, method: str, path: str, cred: str) -> None:
    resp = _request(world, method, path, cred)
    if cred in ("none", "wrong"):
        assert_error_body(resp, 401, "unauthorized", hint="bearer token")
        assert resp.headers.get("www-authenticate") == "Bearer"
    elif cred in EXPECTED[(method, path)]:
        assert resp.status_code not in (401, 403), resp.text
        assert resp.status_code < 500, resp.text
    else:
        assert_error_body(resp, 403, "forbidden", hint=cred)


MUTATING_ROUTES = [r for r in PROTECTED_ROUTES if r[0] != "GET"]


@pytest.mark.parametrize("entitled_first", [True, False], ids=["entitled-first", "entitled-last"])
@pytest.mark.parametrize(("method", "path"), MUTATING_ROUTES, ids=[f"{m} {p}" for m, p in MUTATING_ROUTES])
def test_authorization_sent_twice_is_refused(world: World, method: str, path: str, entitled_first: bool) -> None:
    """The gate and the route must never read different headers: neither order gets through, and both are told
    what to change."""
    entitled = sorted(EXPECTED[(method, path)])[0]
    pair = [("Authorization", f"Bearer {world.tokens[entitled]}"), ("Authorization", f"Bearer {WRONG_TOKEN}")]
    resp = _request(world, method, path, entitled, pair if entitled_first else pair[::-1])
    assert_error_body(resp, 400, "duplicate_authorization", hint="exactly one")


@pytest.mark.parametrize("path", sorted(PUBLIC_PATHS - {"/docs/oauth2-redirect"}))
def test_public_routes_need_no_token(world: World, path: str) -> None:
    assert world.client.get(path.replace("{name}", "chunk")).status_code == 200


# ----- cross-kind rules: a token acts only for workers of its own kind -----------------------------------------
@pytest.mark.parametrize(("scope", "kind"), [
    ("collector", "learner"), ("collector", "evaluator"), ("learner", "collector"), ("evaluator", "learner"),
])
def test_worker_token_cannot_register_another_kind(client: TestClient, tokens: dict[str, str], scope: str,
                                                   kind: str) -> None:
    resp = client.post("/v1/workers", json={"kind": kind, "name": "h"}, headers=auth(tokens[scope]))
    assert_error_body(resp, 403, "forbidden", hint=kind)
    status = client.get("/v1/status", headers=auth(tokens["read"])).json()
    assert status["workers"] == []


def test_admin_may_register_every_kind(client: TestClient, tokens: dict[str, str]) -> None:
    for kind in ("collector", "learner", "evaluator"):
        assert register(client, tokens["admin"], kind).startswith(kind)


@pytest.mark.parametrize("action", ["heartbeat", "claim"])
def test_collector_token_cannot_act_for_a_learner(client: TestClient, tokens: dict[str, str], action: str) -> None:
    learner = register(client, tokens["learner"], "learner")
    resp = client.post(f"/v1/workers/{learner}/{action}", headers=auth(tokens["collector"]))
    assert_error_body(resp, 403, "forbidden", hint=learner)
    # the learner's own token, and admin, may
    assert client.post(f"/v1/workers/{learner}/{action}", headers=auth(tokens["learner"])).status_code == 200
    assert client.post(f"/v1/workers/{learner}/{action}", headers=auth(tokens["admin"])).status_code == 200


def test_collector_claim_does_not_take_the_learner_task(client: TestClient, tokens: dict[str, str]) -> None:
    learner = register(client, tokens["learner"], "learner")
    client.post(f"/v1/workers/{learner}/claim", headers=auth(tokens["collector"]))
    tasks = {t["task_id"]: t for t in client.get("/v1/status", headers=auth(tokens["read"])).json()["tasks"]}
    assert tasks["learner-0"]["state"] == "pending"


def test_learner_token_cannot_sample_for_a_collector_worker(client: TestClient, tokens: dict[str, str]) -> None:
    collector = register(client, tokens["collector"], "collector")
    resp = client.post("/v1/buffers/replay-0/sample", json={"worker_id": collector, "batch_size": 4},
                       headers=auth(tokens["learner"]))
    assert_error_body(resp, 403, "forbidden", hint="learner")


def test_evaluator_token_cannot_report_for_a_collector_worker(client: TestClient, tokens: dict[str, str],
                                                              store: Any) -> None:
    learner = register(client, tokens["learner"], "learner")
    policy = write_policy(store, 1)
    assert client.post("/v1/policies", json={"worker_id": learner, "policy": policy, "iteration": 1},
                       headers=auth(tokens["learner"])).status_code == 200
    collector = register(client, tokens["collector"], "collector")
    resp = client.post("/v1/evaluations", json={"worker_id": collector, "policy_version": 1, "returns": [500.0] * 4,
                                                "lengths": [500] * 4}, headers=auth(tokens["evaluator"]))
    assert_error_body(resp, 403, "forbidden", hint="evaluator")
    assert client.get("/v1/evaluations", headers=auth(tokens["read"])).json() == []


# ----- 401 details ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("header", [
    {},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer "},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": WRONG_TOKEN},
    {"Authorization": f"Bearer {WRONG_TOKEN}"},
])
def test_missing_or_malformed_credentials_are_401_with_challenge(client: TestClient, header: dict[str, str]) -> None:
    for method, path in (("GET", "/v1/status"), ("POST", "/v1/run/stop")):
        resp = client.request(method, path, json={} if method == "POST" else None, headers=header)
        assert_error_body(resp, 401, "unauthorized", hint="RLFLEET_TOKEN")
        assert resp.headers.get("www-authenticate") == "Bearer"


def test_bearer_scheme_is_case_insensitive(client: TestClient, tokens: dict[str, str]) -> None:
    resp = client.get("/v1/status", headers={"Authorization": f"bearer {tokens['read']}"})
    assert resp.status_code == 200


def test_prefix_of_a_valid_token_is_rejected(client: TestClient, tokens: dict[str, str]) -> None:
    resp = client.get("/v1/status", headers=auth(tokens["admin"][:-1]))
    assert_error_body(resp, 401, "unauthorized")


def test_rejected_writes_change_nothing(client: TestClient, tokens: dict[str, str]) -> None:
    before = client.get("/v1/status", headers=auth(tokens["read"])).json()
    assert client.post("/v1/run/stop", json={}, headers=auth(tokens["collector"])).status_code == 403
    assert client.post("/v1/workers", json={"kind": "collector", "name": "h"}, headers=auth(tokens["read"])
                       ).status_code == 403
    after = client.get("/v1/status", headers=auth(tokens["read"])).json()
    assert after["run_state"] == before["run_state"] == "running"
    assert after["workers"] == []


@pytest.mark.parametrize("path", ["/v1/workers", "/v1/chunks", "/v1/run/stop"])
def test_unauthenticated_malformed_body_is_401_not_422(client: TestClient, path: str) -> None:
    resp = client.post(path, content=b'{"kind": ', headers={"Content-Type": "application/json"})
    assert_error_body(resp, 401, "unauthorized")


# ----- open_reads ----------------------------------------------------------------------------------------------
def test_open_reads_serves_gets_without_a_token(coordinator_settings: CoordinatorSettings) -> None:
    settings = coordinator_settings.model_copy(update={"open_reads": True})
    assert settings.open_reads and settings.data_dir == coordinator_settings.data_dir
    with TestClient(create_app(settings), raise_server_exceptions=False) as open_client:
        gets = [p for m, p in app_routes(open_client.app) if m == "GET" and p not in PUBLIC_PATHS]
        assert set(gets) == {p for m, p in EXPECTED if m == "GET"}
        for path in gets:
            resp = open_client.get(path)
            assert resp.status_code not in (401, 403), (path, resp.text)
            assert resp.status_code < 500, (path, resp.text)
        assert open_client.get("/v1/status").json()["run_state"] == "running"
        assert_error_body(open_client.get("/v1/policies/latest"), 404, "not_found")  # none published yet
        # writes still need the right token
        for method, path in EXPECTED:
            if method == "POST":
                resp = open_client.post(path.replace("{worker_id}", "w").replace("{buffer_id}", "replay-0"),
                                        json={})
                assert_error_body(resp, 401, "unauthorized")


def test_reads_need_a_token_by_default(client: TestClient) -> None:
    for path in ("/v1/status", "/v1/run", "/v1/evaluations", "/v1/policies/latest"):
        assert_error_body(client.get(path), 401, "unauthorized")
