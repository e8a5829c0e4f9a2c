"""The coordinator's HTTP API as tests drive it: settings and live clients, workers, status counters, routes and
who may call each of them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.config.run_config import dump_run_config
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.tokens import SCOPES, generate_tokens_file
from tests.support.configs import small_run_config

# Routes anyone may call without a token; everything else in the app must be in an auth table.
PUBLIC_PATHS = frozenset({"/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect", "/healthz", "/readyz",
                          "/metrics", "/v1/schemas", "/v1/schemas/{name}"})

READERS = frozenset(SCOPES)
WORKER_SCOPES = frozenset({"collector", "learner", "evaluator", "admin"})

# The expected permissions, written out by hand: (method, path) -> scopes that may call it.
EXPECTED: dict[tuple[str, str], frozenset[str]] = {
    ("POST", "/v1/workers"): WORKER_SCOPES,
    ("POST", "/v1/workers/{worker_id}/heartbeat"): WORKER_SCOPES,
    ("POST", "/v1/workers/{worker_id}/claim"): WORKER_SCOPES,
    ("POST", "/v1/chunks"): frozenset({"collector", "admin"}),
    ("POST", "/v1/chunk-batches"): frozenset({"collector", "admin"}),
    ("POST", "/v1/buffers/{buffer_id}/corrupt"): frozenset({"learner", "admin"}),
    ("POST", "/v1/buffers/{buffer_id}/sample"): frozenset({"learner", "admin"}),
    ("POST", "/v1/buffers/{buffer_id}/priorities"): frozenset({"learner", "admin"}),
    ("POST", "/v1/learn-info"): frozenset({"learner", "admin"}),
    ("POST", "/v1/datasets/{name}/sample"): frozenset({"learner", "admin"}),
    ("POST", "/v1/generations"): frozenset({"learner", "admin"}),
    ("POST", "/v1/generations/claim"): frozenset({"collector", "admin"}),
    ("POST", "/v1/generations/{generation}/results"): frozenset({"collector", "admin"}),
    ("POST", "/v1/generations/{generation}/close"): frozenset({"learner", "admin"}),
    ("POST", "/v1/policies"): frozenset({"learner", "admin"}),
    ("GET", "/v1/policies/latest"): READERS,
    ("GET", "/v1/policies/opponents"): READERS,
    ("POST", "/v1/evaluations"): frozenset({"evaluator", "admin"}),
    ("GET", "/v1/evaluations"): READERS,
    ("POST", "/v1/tests"): frozenset({"evaluator", "admin"}),
    ("GET", "/v1/tests"): READERS,
    ("GET", "/v1/status"): READERS,
    ("GET", "/v1/run"): READERS,
    ("GET", "/v1/dashboard"): READERS,
    ("POST", "/v1/run/stop"): frozenset({"admin"}),
    ("POST", "/v1/run/pause"): frozenset({"admin"}),
    ("POST", "/v1/run/resume"): frozenset({"admin"}),
    ("POST", "/v1/run/checkpoint"): frozenset({"admin"}),
    ("POST", "/v1/run/evaluate"): frozenset({"admin"}),
    ("PATCH", "/v1/run/settings"): frozenset({"admin"}),
    ("POST", "/v1/run/load-checkpoint"): frozenset({"admin"}),
}

# Run counters that no rejected request may change.
COUNTER_KEYS = ("run_state", "env_steps", "episodes", "chunks", "duplicate_chunks", "policy_version")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_settings(base: Path, **update: Any) -> tuple[CoordinatorSettings, dict[str, str]]:
    """Config file, tokens file and settings under `base` (like the conftest fixtures); `update` overrides."""
    base.mkdir(parents=True, exist_ok=True)
    data_dir = base / "data"
    data_dir.mkdir(exist_ok=True)
    tokens = generate_tokens_file(data_dir / "tokens.json")
    config_file = base / "run.yaml"
    config_file.write_text(dump_run_config(small_run_config()))
    fields: dict[str, Any] = {"config": config_file, "run": small_run_config().name, "data_dir": data_dir,
                              "tokens_file": data_dir / "tokens.json",
                              "sample_wait_seconds": 0.05, "tick_seconds": 0.2, "gc_pacing": False}
    fields.update(update)
    return CoordinatorSettings(**fields), tokens


def store_for(settings: CoordinatorSettings) -> LocalStore:
    return LocalStore(settings.data_dir / "runs" / small_run_config().name / "store")


@contextlib.contextmanager
def running_client(settings: CoordinatorSettings, *, tolerate_shutdown_errors: bool = False) -> Iterator[TestClient]:
    """A TestClient over a fresh app with its lifespan; optionally ignore a crash while shutting down."""
    test_client = TestClient(create_app(settings), raise_server_exceptions=False)
    test_client.__enter__()
    try:
        yield test_client
    finally:
        if tolerate_shutdown_errors:
            with contextlib.suppress(Exception):
                test_client.__exit__(None, None, None)
        else:
            test_client.__exit__(None, None, None)


def app_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, HEAD excluded, flattening included routers on any FastAPI."""
    try:
        from fastapi.routing import iter_route_contexts  # FastAPI versions with lazily included routers
    except ImportError:  # pragma: no cover - older FastAPI: app.routes is already flat
        routes: list[Any] = list(app.routes)
    else:
        routes = list(iter_route_contexts(app.routes))
    found = set()
    for route in routes:
        for method in getattr(route, "methods", None) or ():
            if method != "HEAD":
                found.add((method, route.path))
    return sorted(found)


def enumerate_routes(tmp: Path) -> list[tuple[str, str]]:
    """Build an app (no lifespan) just to list its routes; usable at collection time."""
    settings, _ = make_settings(tmp)
    return app_routes(create_app(settings))


def register(client: TestClient, token: str, kind: str, name: str = "test-host") -> str:
    resp = client.post("/v1/workers", json={"kind": kind, "name": name}, headers=auth(token))
    assert resp.status_code == 200, resp.text
    return resp.json()["worker_id"]


def claim(client: TestClient, token: str, worker_id: str) -> dict[str, Any]:
    resp = client.post(f"/v1/workers/{worker_id}/claim", headers=auth(token))
    assert resp.status_code == 200, resp.text
    return resp.json()


def get_status(client: TestClient, token: str) -> dict[str, Any]:
    resp = client.get("/v1/status", headers=auth(token))
    assert resp.status_code == 200, resp.text
    return resp.json()


def counters(status: dict[str, Any]) -> dict[str, Any]:
    """The parts of /v1/status that only accepted writes may change."""
    snap = {key: status[key] for key in COUNTER_KEYS}
    snap["iteration"] = status["learner"]["iteration"]
    snap["transitions_trained"] = status["learner"]["transitions_trained"]
    snap["losses"] = status["learner"]["losses"]
    snap["evaluations"] = (status["latest_evaluation"], status["best_evaluation"])
    snap["buffers"] = [(b["buffer_id"], b["chunks"], b["transitions"]) for b in status["buffers"]]
    snap["workers"] = sorted(w["worker_id"] for w in status["workers"])
    snap["tasks"] = sorted((t["task_id"], t["state"], t["worker_id"]) for t in status["tasks"])
    return snap


def assert_error_body(resp: Any, status: int, error: str | set[str] | None = None, hint: str | None = None) -> None:
    """The response is `status` with a JSON {"error", "message"} body; error code and message hint if given."""
    assert resp.status_code == status, f"expected {status}, got {resp.status_code}: {resp.text[:500]}"
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    body = resp.json()
    assert isinstance(body, dict) and set(body) == {"error", "message"}, body
    assert isinstance(body["error"], str) and body["error"], body
    assert isinstance(body["message"], str) and len(body["message"]) >= 5, body
    if error is not None:
        allowed = {error} if isinstance(error, str) else error
        assert body["error"] in allowed, body
    if hint is not None:
        assert hint.lower() in body["message"].lower(), f"message lacks {hint!r}: {body['message']!r}"
