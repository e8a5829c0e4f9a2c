"""The replay endpoints over HTTP: priority updates (validation, scopes, unknown buffers), the prioritized
sample reply, and the heartbeat long poll's query bounds."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.shared.storage.local import LocalStore
from tests.support.api import assert_error_body, auth, claim, make_settings, register, running_client, store_for
from tests.support.chunks import write_chunk, write_policy

PRIORITIES = "/v1/buffers/replay-0/priorities"
SAMPLE = "/v1/buffers/replay-0/sample"
OVERRIDES = "replay.sampler=prioritized;replay.min_transitions=1;replay.alpha=1.0"
# Collectors of 2 envs cut chunks after 1000 steps or one finished episode: 64 and 2000 rows both occur.
LAYOUT = "collector.chunk_steps=1000;sampling.n_episode=1"


@dataclass
class World:
    client: TestClient
    tokens: dict[str, str]
    store: LocalStore
    collector: str
    learner: str

    def post_priorities(self, body: dict[str, Any] | bytes, token: str = "learner",
                        url: str = PRIORITIES) -> Any:
        headers = auth(self.tokens[token])
        if isinstance(body, bytes):
            return self.client.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
        return self.client.post(url, json=body, headers=headers)

    def buffer(self) -> dict[str, Any]:
        resp = self.client.get("/v1/status", headers=auth(self.tokens["read"]))
        assert resp.status_code == 200, resp.text
        return resp.json()["buffers"][0]

    def report(self, chunk_id: str, rows: int) -> None:
        config = self.client.app.state.run.ctx.config  # type: ignore[attr-defined]
        body = write_chunk(self.store, "collector-0", chunk_id, self.collector, config=config,
                           steps=rows // config.collector.num_envs)
        assert body["env_steps"] == rows
        resp = self.client.post("/v1/chunks", json=body, headers=auth(self.tokens["collector"]))
        assert resp.status_code == 200, resp.text


@contextlib.contextmanager
def replay_world(base: Path) -> Iterator[World]:
    """A prioritized run with a collector and a learner holding their tasks and one 64-step chunk."""
    settings, tokens = make_settings(base, lease_seconds=3600.0, overrides=f"{OVERRIDES};{LAYOUT}")
    with running_client(settings) as client:
        collector = register(client, tokens["collector"], "collector")
        learner = register(client, tokens["learner"], "learner")
        claim(client, tokens["admin"], collector)
        claim(client, tokens["admin"], learner)
        w = World(client, tokens, store_for(settings), collector, learner)
        w.report("first", 64)  # row ids 0..63
        yield w


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Shared by the tests that leave the buffer as it was."""
    with replay_world(tmp_path_factory.mktemp("replay-api")) as w:
        yield w


def _raw(body: dict[str, Any], **literals: str) -> bytes:
    """JSON text with a field's value replaced by a literal the json module would not write (NaN, Infinity)."""
    text = json.dumps(body)
    for field, literal in literals.items():
        text = text.replace(json.dumps(field) + ': "X"', json.dumps(field) + ": " + literal)
    return text.encode()


@pytest.mark.parametrize(("name", "ids", "priorities", "field"), [
    ("negative", [1], [-0.5], "priorities"),
    ("huge", [1], [1e31], "priorities"),
    ("empty-lists", [], [], "ids"),
    ("empty-priorities", [1], [], "priorities"),
    ("float-id", [1.5], [1.0], "ids"),
    ("string-id", ["a"], [1.0], "ids"),
    ("negative-id", [-1], [1.0], "ids"),
    ("id-beyond-2^62", [2**62 + 1], [1.0], "ids"),
    ("string-priority", [1], ["high"], "priorities"),
])
def test_bad_priority_updates_are_422(world: World, name: str, ids: list[Any], priorities: list[Any],
                                      field: str) -> None:
    before = world.buffer()
    resp = world.post_priorities({"worker_id": world.learner, "ids": ids, "priorities": priorities})
    assert_error_body(resp, 422, "invalid", hint=field)
    assert world.buffer() == before


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_priorities_are_422(world: World, literal: str) -> None:
    before = world.buffer()
    body = _raw({"worker_id": world.learner, "ids": [1, 2], "priorities": "X"}, priorities=f"[1.0, {literal}]")
    assert literal.encode() in body
    resp = world.post_priorities(body)
    assert_error_body(resp, 422, "invalid", hint="priorities")
    assert world.buffer() == before


def test_inconsistent_priority_updates_are_422(world: World) -> None:
    before = world.buffer()
    resp = world.post_priorities({"worker_id": world.learner, "ids": [1, 2], "priorities": [1.0]})
    assert_error_body(resp, 422, "invalid", hint="2 ids but 1 priorities")
    resp = world.post_priorities({"worker_id": world.learner, "ids": [3, 2**40], "priorities": [1.0, 2.0]})
    assert_error_body(resp, 422, "invalid", hint="never issued")
    resp = world.post_priorities({"worker_id": world.learner, "ids": [1], "priorities": [1.0], "extra": 1})
    assert_error_body(resp, 422, "invalid", hint="extra")
    resp = world.post_priorities({"ids": [1], "priorities": [1.0]})
    assert_error_body(resp, 422, "invalid", hint="worker_id")
    assert world.buffer() == before


def test_priorities_for_an_unknown_buffer_are_404(world: World) -> None:
    body = {"worker_id": world.learner, "ids": [1], "priorities": [2.0]}
    for buffer_id in ("replay-1", "nope"):
        resp = world.post_priorities(body, url=f"/v1/buffers/{buffer_id}/priorities")
        assert_error_body(resp, 404, "not_found", hint=buffer_id)


@pytest.mark.parametrize("token", ["collector", "evaluator", "read"])
def test_priorities_need_the_learner_scope(world: World, token: str) -> None:
    before = world.buffer()
    resp = world.post_priorities({"worker_id": world.learner, "ids": [1], "priorities": [2.0]}, token=token)
    assert_error_body(resp, 403, "forbidden")
    assert world.buffer() == before


def test_priorities_for_another_workers_kind_are_403(world: World) -> None:
    resp = world.post_priorities({"worker_id": world.collector, "ids": [1], "priorities": [2.0]}, token="admin")
    assert_error_body(resp, 403, "forbidden", hint="learner")


def test_prioritized_sample_reply_has_ids_and_weights(world: World) -> None:
    resp = world.client.post(SAMPLE, json={"worker_id": world.learner, "batch_size": 8, "num_batches": 2},
                             headers=auth(world.tokens["learner"]))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["unit"] == "transition"
    assert body["batch_size"] == 8
    n = 16
    assert len(body["ids"]) == len(body["weights"]) == len(body["lengths"]) == len(body["offsets"]) == n
    assert len(body["chunk_index"]) == n
    assert body["lengths"] == [1] * n
    assert all(0 <= i < 64 for i in body["ids"])
    assert all(0 < w <= 1.0 for w in body["weights"])
    assert [c["chunk_id"] for c in body["chunks"]] == ["first"]
    assert body["ids"] == body["offsets"]  # the first chunk starts at row id 0


def test_valid_priority_update_then_overwritten_ids_are_ignored(tmp_path: Path) -> None:
    with replay_world(tmp_path) as world:
        _valid_update_then_overwrite(world)


def _valid_update_then_overwrite(world: World) -> None:
    resp = world.post_priorities({"worker_id": world.learner, "ids": [3, 5, 3], "priorities": [0.0, 9.0, 1e30]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["updated"], body["ignored"]) == (3, 0)
    assert body["directive"]["run_state"] == "running"
    assert world.buffer()["max_priority"] == pytest.approx(1e30)

    world.report("big", 2000)  # capacity 2000: every row of "first" (ids 0..63) is overwritten
    buf = world.buffer()
    assert (buf["chunks"], buf["evicted_chunks"], buf["transitions"]) == (1, 1, 2000)
    resp = world.post_priorities({"worker_id": world.learner, "ids": [5, 63, 64, 2063],
                                  "priorities": [2.0, 2.0, 2.0, 2.0]})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["updated"], resp.json()["ignored"]) == (2, 2)
    resp = world.post_priorities({"worker_id": world.learner, "ids": [2064], "priorities": [2.0]})
    assert_error_body(resp, 422, "invalid", hint="never issued")


# ----- heartbeat long poll ----------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["wait=3601", "wait=3600.01", "wait=-1", "newer_than=-1", "newer_than=abc",
                                   "wait=nan", f"newer_than={2**53 + 1}"])
def test_heartbeat_long_poll_bounds_are_422(world: World, query: str) -> None:
    resp = world.client.post(f"/v1/workers/{world.collector}/heartbeat?{query}",
                             headers=auth(world.tokens["collector"]))
    assert_error_body(resp, 422, "invalid", hint=query.split("=")[0])


def test_heartbeat_long_poll_over_http(world: World) -> None:
    url = f"/v1/workers/{world.collector}/heartbeat"
    headers = auth(world.tokens["collector"])
    version = world.client.get("/v1/status", headers=auth(world.tokens["read"])).json()["policy_version"]
    start = time.monotonic()
    resp = world.client.post(f"{url}?newer_than={version}&wait=0.3", headers=headers)
    elapsed = time.monotonic() - start
    assert resp.status_code == 200, resp.text
    assert 0.25 <= elapsed < 2.0  # nothing newer: held for the whole wait
    policy = write_policy(world.store, version + 1)
    resp = world.client.post("/v1/policies", json={"worker_id": world.learner, "policy": policy, "iteration": 1},
                             headers=auth(world.tokens["learner"]))
    assert resp.status_code == 200, resp.text
    start = time.monotonic()
    resp = world.client.post(f"{url}?newer_than={version}&wait=5", headers=headers)
    assert time.monotonic() - start < 1.0  # already newer: no wait
    assert resp.status_code == 200, resp.text
    assert resp.json()["directive"]["policy"]["version"] == version + 1


def test_heartbeat_wait_is_capped_at_the_registrations_max_wait(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path, lease_seconds=1.0)
    with running_client(settings) as client:
        resp = client.post("/v1/workers", json={"kind": "collector", "name": "h"}, headers=auth(tokens["collector"]))
        assert resp.status_code == 200, resp.text
        reply = resp.json()
        assert reply["max_wait_seconds"] == 0.5  # half a lease: a waiting worker always renews in time
        url = f"/v1/workers/{reply['worker_id']}/heartbeat"
        start = time.monotonic()
        resp = client.post(f"{url}?newer_than=0&wait=3600", headers=auth(tokens["collector"]))  # no policy yet
        elapsed = time.monotonic() - start
        assert resp.status_code == 200, resp.text
        assert 0.4 <= elapsed < 2.0
        assert resp.json()["directive"]["policy"] is None
