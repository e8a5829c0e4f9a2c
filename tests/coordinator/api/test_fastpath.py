"""The heartbeat and health fast path answers exactly as the FastAPI routes behind it do."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.api.fastpath import FastPath
from rlfleet.coordinator.main import create_app, serve_app
from tests.support.api import auth, make_settings, register

LIMIT = 4096


@contextlib.contextmanager
def clients(tmp_path: Path) -> Iterator[tuple[TestClient, TestClient, dict[str, str]]]:
    """The same coordinator (one app, one run) reached through the fast path and through FastAPI alone."""
    settings, tokens = make_settings(tmp_path, max_body_bytes=LIMIT)
    app = create_app(settings)
    with TestClient(app) as plain:
        yield TestClient(FastPath(app, LIMIT)), plain, tokens


def answer(resp: Any) -> tuple[int, Any]:
    body = resp.json()
    return resp.status_code, body["error"] if resp.status_code >= 400 else body


def heartbeat_cases(tokens: dict[str, str], collector: str, learner: str) -> list[tuple[str, dict[str, Any]]]:
    c, lt = auth(tokens["collector"]), auth(tokens["learner"])
    base = f"/v1/workers/{collector}/heartbeat"
    return [
        (base, {"headers": c}),
        (base + "?newer_than=0&wait=0.05", {"headers": c}),  # no v1 yet: waits, then answers
        (base + "?wait=2", {"headers": c}),  # no newer_than: answers at once
        (base + "?newer_than=0&newer_than=5&wait=0", {"headers": c}),  # repeated key: the last one counts
        (f"/v1/workers/{learner}/heartbeat", {"headers": lt}),
        (f"/v1/workers/{learner}/heartbeat", {"headers": c}),  # foreign worker: 403
        ("/v1/workers/nobody/heartbeat", {"headers": c}),  # 404
        (base, {}),  # 401 missing
        (base, {"headers": {"Authorization": "Bearer not-a-token-of-this-run"}}),  # 401 unknown
        (base, {"headers": {"Authorization": "Basic abc"}}),  # 401: not a bearer token
        (base, {"headers": auth(tokens["read"])}),  # 403: read scope
        (base, {"headers": [("Authorization", f"Bearer {tokens['collector']}"),  # 400: sent twice
                            ("Authorization", "Bearer not-a-token-of-this-run")]}),
        (base, {"headers": [("Authorization", "Bearer not-a-token-of-this-run"),
                            ("Authorization", f"Bearer {tokens['collector']}")]}),
        (base, {"headers": auth(tokens["admin"])}),  # admin may act for anyone
        (base + "?newer_than=-1", {"headers": c}),
        (base + "?newer_than=abc", {"headers": c}),
        (base + f"?newer_than={2**53 + 1}", {"headers": c}),
        (base + "?wait=nan", {"headers": c}),
        (base + "?wait=3601", {"headers": c}),
        (base + "?wait=x", {"headers": c}),
        (base + "?while_paused=true&wait=0.05", {"headers": c}),  # nothing paused: answers at once
        (base + "?while_paused=Yes&wait=0", {"headers": c}),
        (base + "?while_paused=0", {"headers": c}),
        (base + "?while_paused=maybe", {"headers": c}),  # 422
        (base + "?while_paused=", {"headers": c}),  # a blank value is a value: 422, as for the other two
        (base + "?newer_than=&wait=", {"headers": c}),
        (base + "?newer_than=0&while_paused=true", {"headers": c}),  # 422: one or the other
        (base, {"headers": c, "content": b"x" * (LIMIT + 1)}),  # 413
        (base, {"headers": c, "content": b"{}"}),  # a small body is read and ignored
    ]


def test_heartbeats_match_the_fastapi_route(tmp_path: Path) -> None:
    with clients(tmp_path) as (fast, plain, tokens):
        collector = register(plain, tokens["collector"], "collector")
        learner = register(plain, tokens["learner"], "learner")
        for url, kwargs in heartbeat_cases(tokens, collector, learner):
            got, want = answer(fast.post(url, **kwargs)), answer(plain.post(url, **kwargs))
            assert got == want, (url, kwargs.get("headers"), got, want)


def test_authorization_sent_twice_is_refused_by_the_fast_path(tmp_path: Path) -> None:
    with clients(tmp_path) as (fast, _, tokens):
        collector = register(fast, tokens["collector"], "collector")
        twice = [("Authorization", f"Bearer {tokens['collector']}")] * 2
        resp = fast.post(f"/v1/workers/{collector}/heartbeat", headers=twice)
        assert resp.status_code == 400 and resp.json()["error"] == "duplicate_authorization"


def test_healthz_matches_and_other_routes_pass_through(tmp_path: Path) -> None:
    with clients(tmp_path) as (fast, plain, tokens):
        assert fast.get("/healthz").json() == plain.get("/healthz").json() == {"status": "ok"}
        assert fast.get("/healthz").headers["content-type"] == "application/json"
        assert fast.post("/healthz").status_code == plain.post("/healthz").status_code == 405
        assert fast.get("/readyz").json() == plain.get("/readyz").json()
        worker = register(fast, tokens["collector"], "collector")  # registration is FastAPI's
        resp = fast.post(f"/v1/workers/{worker}/heartbeat/extra", headers=auth(tokens["collector"]))
        assert resp.status_code == 404  # not a heartbeat path: FastAPI answers


def test_long_poll_answers_with_the_new_version(tmp_path: Path) -> None:
    """Through the fast path a waiting heartbeat returns the published version, as the route's does."""
    from tests.support.api import claim, store_for
    from tests.support.chunks import write_policy

    with clients(tmp_path) as (fast, plain, tokens):
        collector = register(fast, tokens["collector"], "collector")
        learner = register(plain, tokens["learner"], "learner")
        claim(plain, tokens["learner"], learner)
        store = store_for(make_settings(tmp_path)[0])
        resp = plain.post("/v1/policies", json={"worker_id": learner, "iteration": 1,
                                                "policy": write_policy(store, 1)}, headers=auth(tokens["learner"]))
        assert resp.status_code == 200, resp.text
        resp = fast.post(f"/v1/workers/{collector}/heartbeat?newer_than=0&wait=5", headers=auth(tokens["collector"]))
        assert resp.status_code == 200 and resp.json()["directive"]["policy"]["version"] == 1
        fast.get("/healthz")
        fast.post("/v1/workers/nobody/heartbeat", headers=auth(tokens["collector"]))
        text = plain.get("/metrics").text
    # Answered in front of FastAPI, yet timed under FastAPI's route templates; the long poll that learnt of v1
    # is one propagation sample.
    heartbeat = 'rlfleet_http_request_duration_seconds_count{method="POST",route="/v1/workers/{worker_id}/heartbeat"'
    assert f'{heartbeat},status="200"}} 1.0' in text and f'{heartbeat},status="404"}} 1.0' in text
    assert 'rlfleet_http_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1.0' in text
    assert "rlfleet_policy_propagation_seconds_count 1.0" in text


@pytest.mark.parametrize("on", [True, False])
def test_serve_app_wraps_only_when_the_setting_is_on(tmp_path: Path, on: bool) -> None:
    settings, _ = make_settings(tmp_path, fast_path=on)
    assert isinstance(serve_app(settings), FastPath) is on
