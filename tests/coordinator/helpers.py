"""Small helpers for the coordinator HTTP API tests: workers, real chunk payloads, status counters, routes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi.testclient import TestClient

from coordinator.main import create_app
from coordinator.settings import CoordinatorSettings
from shared.config.run_config import RunConfig, dump_run_config
from shared.payloads.codec import encode_chunk
from shared.storage.layout import chunk_path, policy_path
from shared.storage.local import LocalStore
from shared.tokens import generate_tokens_file
from shared.wire import ChunkReport, EpisodeStat
from tests.conftest import auth, small_run_config  # noqa: F401 - re-exported for the API tests

# Routes anyone may call without a token; everything else in the app must be in an auth table.
PUBLIC_PATHS = frozenset({"/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect", "/healthz", "/readyz",
                          "/metrics", "/v1/schemas", "/v1/schemas/{name}"})

# Run counters that no rejected request may change.
COUNTER_KEYS = ("run_state", "env_steps", "episodes", "chunks", "duplicate_chunks", "policy_version")




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


def chunk_arrays(steps: int, num_envs: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    """A CartPole-shaped chunk of `steps` vector steps of `num_envs` envs, as the collector's Rollout produces:
    arrays of shape (steps, num_envs, ...), so row t * num_envs + i is step t of env i."""
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.standard_normal((steps, num_envs, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, (steps, num_envs)).astype(np.int64),
        "rewards": np.ones((steps, num_envs), dtype=np.float32),
        "terminated": np.zeros((steps, num_envs), dtype=bool),
        "truncated": np.zeros((steps, num_envs), dtype=bool),
        "next_obs": rng.standard_normal((steps, num_envs, 4)).astype(np.float32),
        "valid": np.ones((steps, num_envs), dtype=bool),
    }


def spread_ends(rows: int, count: int) -> list[int]:
    """`count` strictly ascending episode-end rows below `rows`, the last one at the chunk's last row."""
    assert count <= rows, (count, rows)
    return [rows * (i + 1) // count - 1 for i in range(count)]


def write_chunk(
    store: LocalStore, task_id: str, chunk_id: str, worker_id: str, *, steps: int | None = None, seed: int = 0,
    episodes: tuple[tuple[float, int], ...] = ((10.0, 10),), policy_version: int = 0,
    config: RunConfig | None = None,
) -> dict[str, Any]:
    """Encode a real payload, write it to the store and return a valid ChunkReport as a JSON dict.

    The chunk has the layout of `config` (the small test config by default): collector.num_envs envs of
    `steps` vector steps each (collector.chunk_steps by default; pass fewer only under sampling.n_episode),
    so env_steps = num_envs x steps rows, with one episode end per reported episode."""
    config = config or small_run_config()
    num_envs = config.collector.num_envs
    steps = config.collector.chunk_steps if steps is None else steps
    rows = steps * num_envs
    path = chunk_path(task_id, chunk_id)
    data = encode_chunk(chunk_arrays(steps, num_envs, seed), {"task_id": task_id, "chunk_id": chunk_id,
                                                             "policy_version": policy_version})
    sha = store.put(path, data)
    report = ChunkReport(
        chunk_id=chunk_id, worker_id=worker_id, task_id=task_id, payload_path=path, sha256=sha,
        size_bytes=len(data), env_steps=rows, num_envs=num_envs, ends=spread_ends(rows, len(episodes)),
        episodes=[EpisodeStat(ret=r, length=n) for r, n in episodes], policy_version=policy_version,
    )
    return report.model_dump(mode="json")


def write_policy(store: LocalStore, version: int, content: bytes | None = None) -> dict[str, Any]:
    """Write a (fake) policy file under policies/ and return its PolicyRef as a JSON dict."""
    path = policy_path(version)
    sha = store.put(path, content if content is not None else f"weights of v{version}".encode())
    return {"version": version, "path": path, "sha256": sha}


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
