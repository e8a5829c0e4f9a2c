"""A barrage of malformed, hostile and inconsistent requests against every POST endpoint.

Every case must get its documented 4xx with a JSON {"error", "message"} body that says what is wrong, never a
5xx, and must leave the run's counters exactly as they were. The barrage runs against one module-wide
coordinator so that, at the end, it can check the service still answers and nothing was counted.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.wire import ChunkReport, EvaluationReport, LearnReport, PolicyPublish, RegisterRequest, SampleRequest
from tests.support.api import (
    assert_error_body,
    auth,
    claim,
    counters,
    get_status,
    make_settings,
    register,
    running_client,
    store_for,
)
from tests.support.chunks import write_chunk, write_policy

MAX_BODY = 64 * 1024
NAN = "__NAN__"
INF = "__INF__"
NEG_INF = "__NEG_INF__"
BAD_IDS = {"dotdot": "../etc", "slash": "a/b", "empty": "", "too-long": "a" * 200}


def raw(body: dict[str, Any]) -> bytes:
    """JSON text with NaN/Infinity literals where the placeholders are (Python's json accepts these)."""
    text = json.dumps(body)
    for marker, literal in ((NAN, "NaN"), (NEG_INF, "-Infinity"), (INF, "Infinity")):
        text = text.replace(f'"{marker}"', literal)
    return text.encode()


# ----- the module-wide coordinator ------------------------------------------------------------------------------
class World:
    def __init__(self, client: TestClient, tokens: dict[str, str], settings: CoordinatorSettings) -> None:
        self.client = client
        self.tokens = tokens
        self.settings = settings
        self.store = store_for(settings)
        admin = tokens["admin"]
        self.collector = register(client, tokens["collector"], "collector")
        self.learner = register(client, tokens["learner"], "learner")
        self.evaluator = register(client, tokens["evaluator"], "evaluator")
        self.idle_learner = register(client, tokens["learner"], "learner", name="idle")
        for worker in (self.collector, self.learner, self.evaluator):
            claim(client, admin, worker)
        self.existing_chunk = write_chunk(self.store, "collector-0", "existing", self.collector)
        assert client.post("/v1/chunks", json=self.existing_chunk, headers=auth(tokens["collector"])).status_code == 200
        self.policy_v1 = write_policy(self.store, 1)
        resp = client.post("/v1/policies", json={"worker_id": self.learner, "policy": self.policy_v1, "iteration": 1},
                           headers=auth(tokens["learner"]))
        assert resp.status_code == 200, resp.text
        self.policy_v2 = write_policy(self.store, 2)  # in the store, never published
        outside = settings.data_dir.parent / "outside.bin"
        outside.write_bytes(b"not yours" * 10)
        self.outside_size = outside.stat().st_size
        for link in (chunk_path("collector-0", "escape"), "policies/escape.safetensors"):
            target = self.store.root / link
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(outside, target)
        self._ids = itertools.count()
        self.openapi = client.get("/openapi.json").json()
        self.snapshot = counters(get_status(client, tokens["read"]))

    def fresh_chunk(self, task_id: str = "collector-0") -> dict[str, Any]:
        """A valid, never-reported chunk report whose payload is in the store."""
        n = next(self._ids)
        return write_chunk(self.store, task_id, f"bad-{n}", self.collector, seed=n)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    settings, tokens = make_settings(tmp_path_factory.mktemp("bad-input"), lease_seconds=3600.0,
                                     max_body_bytes=MAX_BODY)
    with running_client(settings) as client:
        yield World(client, tokens, settings)


@dataclass(frozen=True)
class Endpoint:
    path: str  # the route template, for the OpenAPI lookup
    url: str
    scope: str
    base: Callable[[World], dict[str, Any] | None]


ENDPOINTS = {
    "register": Endpoint("/v1/workers", "/v1/workers", "collector", lambda w: {"kind": "collector", "name": "h"}),
    "heartbeat": Endpoint("/v1/workers/{worker_id}/heartbeat", "/v1/workers/{worker_id}/heartbeat", "admin",
                          lambda w: None),
    "claim": Endpoint("/v1/workers/{worker_id}/claim", "/v1/workers/{worker_id}/claim", "admin", lambda w: None),
    "chunks": Endpoint("/v1/chunks", "/v1/chunks", "collector", lambda w: w.fresh_chunk()),
    "sample": Endpoint("/v1/buffers/{buffer_id}/sample", "/v1/buffers/replay-0/sample", "learner",
                       lambda w: {"worker_id": w.learner, "batch_size": 32, "num_batches": 1}),
    "learn-info": Endpoint("/v1/learn-info", "/v1/learn-info", "learner",
                           lambda w: {"worker_id": w.learner, "iteration": 5, "transitions_trained": 100,
                                      "losses": {"td_loss": 0.1}}),
    "policies": Endpoint("/v1/policies", "/v1/policies", "learner",
                         lambda w: {"worker_id": w.learner, "policy": dict(w.policy_v2), "iteration": 5}),
    "evaluations": Endpoint("/v1/evaluations", "/v1/evaluations", "evaluator",
                            lambda w: {"worker_id": w.evaluator, "policy_version": 1,  # evaluation.episodes=4
                                       "returns": [10.0, 20.0, 30.0, 40.0], "lengths": [10, 20, 30, 40]}),
    "stop": Endpoint("/v1/run/stop", "/v1/run/stop", "admin", lambda w: {"reason": "never sent as is"}),
}
BODY_ENDPOINTS = ["register", "chunks", "sample", "learn-info", "policies", "evaluations", "stop"]
MODELS = {"register": RegisterRequest, "chunks": ChunkReport, "sample": SampleRequest, "learn-info": LearnReport,
          "policies": PolicyPublish, "evaluations": EvaluationReport}

Mutation = Callable[[dict[str, Any], World], Any]


@dataclass(frozen=True)
class Case:
    endpoint: str
    mutate: Mutation  # valid base body -> body to send (dict, bytes, or a Raw/Stream wrapper)
    status: int
    error: str | set[str] | None = None
    hint: str | None = None
    url: Callable[[World], str] | None = None  # overrides the endpoint's URL
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Content:
    """Send these bytes as they are (with the given content type, if any)."""
    data: bytes | Callable[[], Iterator[bytes]]
    content_type: str | None = "application/json"


def setting(**changes: Any) -> Mutation:
    def mutate(body: dict[str, Any], world: World) -> dict[str, Any]:
        return {**body, **changes}
    return mutate


def without(field: str) -> Mutation:
    return lambda body, world: {k: v for k, v in body.items() if k != field}


def with_policy(**changes: Any) -> Mutation:
    return lambda body, world: {**body, "policy": {**body["policy"], **changes}}


def as_raw(**changes: Any) -> Mutation:
    return lambda body, world: Content(raw({**body, **changes}))


def same(body: dict[str, Any], world: World) -> dict[str, Any]:
    return body


def worker(attr: str, field: str = "worker_id") -> Mutation:
    return lambda body, world: {**body, field: getattr(world, attr)}


def cases() -> Iterator[Any]:
    # -- generic: every endpoint with a JSON body ----------------------------------------------------------------
    for ep in BODY_ENDPOINTS:
        yield pytest.param(Case(ep, lambda b, w: Content(b'{"kind": '), 422, "invalid", "JSON"), id=f"{ep}-malformed")
        yield pytest.param(Case(ep, lambda b, w: Content(json.dumps(b).encode()[:-1]), 422, "invalid", "JSON"),
                           id=f"{ep}-truncated")
        yield pytest.param(Case(ep, lambda b, w: Content(b"[1, 2]"), 422, "invalid", "body"), id=f"{ep}-array")
        yield pytest.param(Case(ep, lambda b, w: Content(b'"text"'), 422, "invalid", "body"), id=f"{ep}-string")
        yield pytest.param(Case(ep, lambda b, w: Content(b"null"), 422, "invalid"), id=f"{ep}-null")
        yield pytest.param(Case(ep, lambda b, w: Content(b""), 422, "invalid", "required"), id=f"{ep}-empty")
        yield pytest.param(Case(ep, lambda b, w: Content(json.dumps(b).encode(), "text/plain"), 422, "invalid"),
                           id=f"{ep}-not-json-content-type")
        yield pytest.param(Case(ep, lambda b, w: Content(b'{"name": "\xff\xfe"}'), 400, "http_error", "body"),
                           id=f"{ep}-invalid-utf8")
        yield pytest.param(Case(ep, setting(surprise=1), 422, "invalid", "surprise"), id=f"{ep}-extra-field")
        model = MODELS.get(ep)
        for field in [n for n, f in model.model_fields.items() if f.is_required()] if model else []:
            yield pytest.param(Case(ep, without(field), 422, "invalid", field), id=f"{ep}-missing-{field}")
    yield pytest.param(Case("register", lambda b, w: Content(b"[" * 50_000), 400, "http_error", "body"),
                       id="register-deeply-nested")

    # -- oversized bodies: every POST route -------------------------------------------------------------------
    big = b'{"pad": "' + b"x" * (MAX_BODY + 1) + b'"}'
    for ep in ENDPOINTS:
        yield pytest.param(Case(ep, lambda b, w: Content(big), 413, "payload_too_large", "exceeds"),
                           id=f"{ep}-oversized-content-length")

        def streamed() -> Iterator[bytes]:
            for start in range(0, len(big), 8192):
                yield big[start:start + 8192]

        if ep in ("heartbeat", "claim"):
            continue  # these routes never read a body, so a streamed one is never buffered (Content-Length case above)
        yield pytest.param(
            Case(ep, lambda b, w: Content(streamed), 413, "payload_too_large", "exceeds"),
            id=f"{ep}-oversized-streamed",
        )

    # -- register ---------------------------------------------------------------------------------------------
    for name, bad in BAD_IDS.items():
        yield pytest.param(Case("register", setting(name=bad), 422, "invalid", "name"), id=f"register-name-{name}")
    yield pytest.param(Case("register", setting(kind="admin"), 422, "invalid", "kind"), id="register-kind-admin")
    yield pytest.param(Case("register", setting(kind=5), 422, "invalid", "kind"), id="register-kind-int")
    yield pytest.param(Case("register", setting(name=["h"]), 422, "invalid", "name"), id="register-name-list")
    yield pytest.param(Case("register", as_raw(name=NAN), 422, "invalid", "name"), id="register-name-nan")

    # -- heartbeat / claim: worker ids in the path -------------------------------------------------------------
    for ep in ("heartbeat", "claim"):
        for name, bad in {"unknown": "collector-999-abcdef", "too-long": "a" * 200}.items():
            yield pytest.param(Case(ep, same, 404, "unknown_worker", "register again",
                                    url=lambda w, ep=ep, bad=bad: f"/v1/workers/{bad}/{ep}"), id=f"{ep}-{name}")
        for name in ("dotdot", "slash", "empty"):
            yield pytest.param(Case(ep, same, 404, {"not_found", "unknown_worker"},
                                    url=lambda w, ep=ep, name=name: f"/v1/workers/{BAD_IDS[name]}/{ep}"),
                               id=f"{ep}-{name}")

    # -- chunks -----------------------------------------------------------------------------------------------
    for field in ("chunk_id", "worker_id", "task_id"):
        for name, bad in BAD_IDS.items():
            yield pytest.param(Case("chunks", setting(**{field: bad}), 422, "invalid", field),
                               id=f"chunks-{field}-{name}")
    for name, bad in {"dotdot": "../x.msgpack", "absolute": "/etc/passwd", "inner-dotdot": "chunks/../../x",
                      "backslash": "chunks\\..\\x", "empty": "", "trailing-slash": "chunks/"}.items():
        yield pytest.param(Case("chunks", setting(payload_path=bad), 422, "invalid", "payload_path"),
                           id=f"chunks-path-{name}")
    yield pytest.param(Case("chunks", lambda b, w: {**b, "payload_path": "chunks/collector-0/existing.msgpack"}, 422,
                            "invalid", "payload_path must be"), id="chunks-path-other-chunk")
    yield pytest.param(Case("chunks", lambda b, w: {**b, "payload_path": w.policy_v1["path"]}, 422, "invalid",
                            "payload_path must be"), id="chunks-path-not-under-chunks")
    yield pytest.param(Case("chunks", lambda b, w: {**b, "task_id": "collector-1"}, 422, "invalid",
                            "payload_path must be"), id="chunks-path-other-task")

    def payload_missing(body: dict[str, Any], world: World) -> dict[str, Any]:
        world.store.delete(body["payload_path"])
        return body

    yield pytest.param(Case("chunks", payload_missing, 422, "invalid", "not in the store"), id="chunks-payload-missing")
    yield pytest.param(Case("chunks", lambda b, w: {**b, "size_bytes": b["size_bytes"] + 1}, 422, "invalid", "bytes"),
                       id="chunks-size-mismatch")
    # a collector reports chunks of the task it holds, and only that one
    yield pytest.param(Case("chunks", lambda b, w: w.fresh_chunk("collector-99"), 409, "task_not_held",
                            "collector-99"), id="chunks-unknown-task")
    yield pytest.param(Case("chunks", lambda b, w: w.fresh_chunk("learner-0"), 409, "task_not_held", "learner-0"),
                       id="chunks-learner-task")
    yield pytest.param(Case("chunks", setting(worker_id="collector-999-abcdef"), 404, "unknown_worker",
                            "register again"), id="chunks-unknown-worker")
    yield pytest.param(Case("chunks", worker("learner"), 403, "forbidden", "collector"), id="chunks-learner-worker")
    # the layout the run's config declares (2 envs x 16 steps), ends that fit it, a published policy
    yield pytest.param(Case("chunks", setting(num_envs=4), 422, "invalid", "num_envs"), id="chunks-num-envs-other")
    for name, rows in {"short": 30, "long": 34, "odd": 31}.items():
        yield pytest.param(Case("chunks", setting(env_steps=rows), 422, "invalid", "env_steps"),
                           id=f"chunks-env-steps-{name}")
    for name, ends in {"at-env-steps": [32], "descending": [9, 3], "repeated": [5, 5]}.items():
        yield pytest.param(Case("chunks", setting(ends=ends), 422, "invalid", "ends"), id=f"chunks-ends-{name}")
    yield pytest.param(Case("chunks", setting(ends=[]), 422, "invalid", "episode ends"),
                       id="chunks-episodes-without-ends")
    yield pytest.param(Case("chunks", setting(env_errors=2), 422, "invalid", "env_errors"),
                       id="chunks-env-errors-beyond-ends")
    yield pytest.param(Case("chunks", setting(fresh_columns=[2]), 422, "invalid", "fresh_columns"),
                       id="chunks-fresh-column-beyond-envs")
    yield pytest.param(Case("chunks", setting(policy_version=2), 422, "invalid", "never published"),
                       id="chunks-policy-version-unpublished")
    yield pytest.param(Case("chunks", lambda b, w: {**b, "chunk_id": "escape", "size_bytes": w.outside_size,
                                                    "payload_path": chunk_path("collector-0", "escape")},
                            422, "invalid", "store root"), id="chunks-symlink-leaves-store")
    yield pytest.param(Case("chunks", lambda b, w: {**w.existing_chunk, "sha256": "0" * 64}, 409, "conflict",
                            "different content"), id="chunks-same-id-other-sha")
    for name, value in {"upper": "A" * 64, "short": "ab" * 10, "int": 12, "non-hex": "g" * 64}.items():
        yield pytest.param(Case("chunks", setting(sha256=value), 422, "invalid", "sha256"), id=f"chunks-sha-{name}")
    for field, value in {"size_bytes": 0, "env_steps": 0}.items():
        yield pytest.param(Case("chunks", setting(**{field: value}), 422, "invalid", field), id=f"chunks-{field}-zero")
    for name, changes in {"env-steps-huge": {"env_steps": 1_000_001}, "env-steps-float": {"env_steps": 1.5},
                          "env-steps-list": {"env_steps": [8]}, "size-text": {"size_bytes": "big"},
                          "policy-version-negative": {"policy_version": -1},
                          "policy-version-huge": {"policy_version": 2**60}}.items():
        field = next(iter(changes))
        yield pytest.param(Case("chunks", setting(**changes), 422, "invalid", field), id=f"chunks-{name}")
    for name, episodes in {"not-a-list": "x", "missing-length": [{"ret": 1.0}],
                           "length-zero": [{"ret": 1.0, "length": 0}], "ret-text": [{"ret": "high", "length": 3}],
                           "extra": [{"ret": 1.0, "length": 3, "seed": 1}]}.items():
        yield pytest.param(Case("chunks", setting(episodes=episodes), 422, "invalid", "episodes"),
                           id=f"chunks-episodes-{name}")
    for name, literal in {"nan": NAN, "inf": INF, "neg-inf": NEG_INF}.items():
        yield pytest.param(Case("chunks", as_raw(episodes=[{"ret": literal, "length": 3}]), 422, "invalid", "finite"),
                           id=f"chunks-ret-{name}")
    yield pytest.param(Case("chunks", as_raw(env_steps=INF), 422, "invalid", "env_steps"), id="chunks-env-steps-inf")

    # -- sample -----------------------------------------------------------------------------------------------
    yield pytest.param(Case("sample", same, 404, "not_found", "replay-9", url=lambda w: "/v1/buffers/replay-9/sample"),
                       id="sample-unknown-buffer")
    for name in ("dotdot", "slash", "empty"):
        yield pytest.param(Case("sample", same, 404, "not_found",
                                url=lambda w, name=name: f"/v1/buffers/{BAD_IDS[name]}/sample"),
                           id=f"sample-buffer-{name}")
    for name, changes in {"batch-zero": {"batch_size": 0}, "batch-negative": {"batch_size": -1},
                          "batch-too-big": {"batch_size": 4097}, "batch-float": {"batch_size": 1.5},
                          "batch-text": {"batch_size": "many"}, "batch-null": {"batch_size": None},
                          "num-batches-zero": {"num_batches": 0}, "num-batches-too-big": {"num_batches": 257}}.items():
        field = next(iter(changes))
        yield pytest.param(Case("sample", setting(**changes), 422, "invalid", field), id=f"sample-{name}")
    yield pytest.param(Case("sample", as_raw(batch_size=NAN), 422, "invalid", "batch_size"), id="sample-batch-nan")
    for name, bad in BAD_IDS.items():
        yield pytest.param(Case("sample", setting(worker_id=bad), 422, "invalid", "worker_id"),
                           id=f"sample-worker-{name}")
    yield pytest.param(Case("sample", setting(worker_id="learner-999-abcdef"), 404, "unknown_worker", "learner-999"),
                       id="sample-unknown-worker")
    yield pytest.param(Case("sample", worker("idle_learner"), 409, "conflict", "claim"),
                       id="sample-worker-without-task")
    yield pytest.param(Case("sample", worker("collector"), 403, "forbidden", "learner"), id="sample-collector-worker")
    yield pytest.param(Case("sample", same, 409, "not_enough_data", "needs 64"), id="sample-not-enough-data")

    # -- learn-info -------------------------------------------------------------------------------------------
    for name, literal in {"nan": NAN, "inf": INF, "neg-inf": NEG_INF}.items():
        yield pytest.param(Case("learn-info", as_raw(losses={"td_loss": literal}), 422, "invalid", "finite"),
                           id=f"learn-info-loss-{name}")
    for name, changes in {"iteration-negative": {"iteration": -1}, "iteration-float": {"iteration": 1.5},
                          "trained-text": {"transitions_trained": "many"}, "losses-list": {"losses": [0.1]},
                          "losses-text-value": {"losses": {"td_loss": "low"}},
                          "losses-bad-key": {"losses": {"a/b": 0.1}},
                          "losses-too-many": {"losses": {f"l{i}": 0.0 for i in range(65)}},
                          "hooks-failed-bad-name": {"hooks_failed": {"hooks:log": "KeyError"}},
                          "hooks-failed-too-many": {"hooks_failed": {f"m:f{i}@end": "E" for i in range(33)}},
                          "hooks-failed-long-error": {"hooks_failed": {"m:f@end": "E" * 1001}}}.items():
        field = next(iter(changes))
        yield pytest.param(Case("learn-info", setting(**changes), 422, "invalid", field), id=f"learn-info-{name}")
    yield pytest.param(Case("learn-info", as_raw(iteration=INF), 422, "invalid", "iteration"),
                       id="learn-info-iteration-inf")
    yield pytest.param(Case("learn-info", setting(worker_id="learner-999-abcdef"), 404, "unknown_worker"),
                       id="learn-info-unknown-worker")
    yield pytest.param(Case("learn-info", worker("evaluator"), 403, "forbidden", "learner"),
                       id="learn-info-evaluator-worker")

    # -- policies ---------------------------------------------------------------------------------------------
    yield pytest.param(Case("policies", lambda b, w: {**b, "policy": {**b["policy"],
                                                                      "path": w.existing_chunk["payload_path"]}},
                            422, "invalid", "policies/"), id="policies-path-not-under-policies")
    for name, bad in {"dotdot": "../x.msgpack", "absolute": "/etc/passwd", "inner-dotdot": "policies/../../x"}.items():
        yield pytest.param(Case("policies", with_policy(path=bad), 422, "invalid", "path"), id=f"policies-path-{name}")
    yield pytest.param(Case("policies", with_policy(path="policies/v00000099.safetensors"), 422, "invalid",
                            "not in the store"), id="policies-file-missing")
    yield pytest.param(
        Case("policies", with_policy(path="policies/escape.safetensors"), 422, "invalid", "store root"),
        id="policies-symlink-leaves-store",
    )
    for name, changes in {"version-zero": {"version": 0}, "version-text": {"version": "two"},
                          "sha-short": {"sha256": "abc"}}.items():
        field = next(iter(changes))
        yield pytest.param(Case("policies", with_policy(**changes), 422, "invalid", field), id=f"policies-{name}")
    yield pytest.param(Case("policies", lambda b, w: {**b, "policy": {**w.policy_v1, "sha256": "1" * 64}}, 409,
                            "conflict", "not newer"), id="policies-same-version-other-sha")
    yield pytest.param(Case("policies", setting(iteration=2**60), 422, "invalid", "iteration"),
                       id="policies-iteration-huge")
    yield pytest.param(Case("policies", as_raw(iteration=NAN), 422, "invalid", "iteration"),
                       id="policies-iteration-nan")
    yield pytest.param(Case("policies", setting(policy="policies/v2"), 422, "invalid", "policy"),
                       id="policies-ref-text")
    yield pytest.param(Case("policies", setting(worker_id="learner-999-abcdef"), 404, "unknown_worker"),
                       id="policies-unknown-worker")
    yield pytest.param(Case("policies", worker("collector"), 403, "forbidden", "learner"),
                       id="policies-collector-worker")

    # -- evaluations ------------------------------------------------------------------------------------------
    yield pytest.param(Case("evaluations", setting(policy_version=2), 422, "invalid", "never published"),
                       id="evaluations-unpublished-version")
    yield pytest.param(Case("evaluations", setting(policy_version=0), 422, "invalid", "policy_version"),
                       id="evaluations-version-zero")
    yield pytest.param(Case("evaluations", setting(returns=[1.0, 2.0, 3.0]), 422, "invalid", "same number"),
                       id="evaluations-length-mismatch")
    for name, n in {"too-few": 3, "too-many": 5, "one-lucky": 1}.items():  # exactly evaluation.episodes (4)
        yield pytest.param(Case("evaluations", setting(returns=[500.0] * n, lengths=[500] * n), 422, "invalid",
                                "evaluation.episodes=4"), id=f"evaluations-episodes-{name}")
    for name, changes in {"returns-empty": {"returns": [], "lengths": []}, "lengths-zero": {"lengths": [0, 1]},
                          "returns-text": {"returns": "10"}, "returns-items-text": {"returns": ["a", "b"]}}.items():
        field = next(iter(changes))
        yield pytest.param(Case("evaluations", setting(**changes), 422, "invalid", field), id=f"evaluations-{name}")
    for name, literal in {"nan": NAN, "inf": INF, "neg-inf": NEG_INF}.items():
        yield pytest.param(Case("evaluations", as_raw(returns=[10.0, literal]), 422, "invalid", "finite"),
                           id=f"evaluations-return-{name}")
    yield pytest.param(Case("evaluations", setting(worker_id="evaluator-999-abcdef"), 404, "unknown_worker"),
                       id="evaluations-unknown-worker")
    yield pytest.param(Case("evaluations", worker("collector"), 403, "forbidden", "evaluator"),
                       id="evaluations-collector-worker")
    for name, returns in {"sum-overflows": [1e308] * 4, "variance-overflows": [1e308, -1e308] * 2}.items():
        yield pytest.param(
            Case("evaluations", setting(returns=returns), 422, "invalid"), id=f"evaluations-{name}",
        )

    # -- run/stop ---------------------------------------------------------------------------------------------
    yield pytest.param(Case("stop", setting(reason="x" * 501), 422, "invalid", "reason"), id="stop-reason-too-long")
    yield pytest.param(Case("stop", setting(reason=5), 422, "invalid", "reason"), id="stop-reason-int")
    yield pytest.param(Case("stop", setting(reason=None), 422, "invalid", "reason"), id="stop-reason-null")


def send(world: World, case: Case) -> Any:
    ep = ENDPOINTS[case.endpoint]
    url = case.url(world) if case.url else ep.url.replace("{worker_id}", world.collector)
    headers = dict(auth(world.tokens[ep.scope]))
    base = ep.base(world)
    body = case.mutate(base if base is not None else {}, world)
    if isinstance(body, Content):
        if body.content_type:
            headers["Content-Type"] = body.content_type
        content = body.data() if callable(body.data) else body.data
        return world.client.post(url, content=content, headers=headers)
    if base is None:
        return world.client.post(url, headers=headers)
    return world.client.post(url, json=body, headers=headers)


@pytest.mark.parametrize("case", list(cases()))
def test_bad_request_is_a_helpful_4xx_and_changes_nothing(world: World, case: Case) -> None:
    resp = send(world, case)
    assert resp.status_code < 500, f"server error {resp.status_code}: {resp.text[:300]}"
    assert_error_body(resp, case.status, case.error, case.hint)
    documented = world.openapi["paths"][ENDPOINTS[case.endpoint].path]["post"]["responses"]
    assert str(case.status) in documented, f"{case.status} is not documented for {ENDPOINTS[case.endpoint].path}"
    if case.status == 413:
        assert "exceeds" in resp.json()["message"] and str(MAX_BODY) in resp.json()["message"]
    assert counters(get_status(world.client, world.tokens["read"])) == world.snapshot


def test_case_ids_are_unique() -> None:
    ids = [p.id for p in cases()]
    assert len(ids) == len(set(ids))
    assert len(ids) > 150


def test_service_still_healthy_after_the_barrage(world: World) -> None:
    """Runs last in file order; also holds alone since every write above was rejected."""
    assert world.client.get("/healthz").json() == {"status": "ok"}
    ready = world.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["run_state"] == "running"
    status = get_status(world.client, world.tokens["read"])
    assert counters(status) == world.snapshot
    assert status["env_steps"] == 32 and status["chunks"] == 1 and status["policy_version"] == 1
    assert world.client.get("/v1/evaluations", headers=auth(world.tokens["read"])).json() == []
    # and it still accepts good work
    good = world.fresh_chunk()
    resp = world.client.post("/v1/chunks", json=good, headers=auth(world.tokens["collector"]))
    assert resp.status_code == 200 and resp.json()["duplicate"] is False
    status = get_status(world.client, world.tokens["read"])
    assert status["env_steps"] == 64
    world.snapshot = counters(status)  # keep the per-case check valid should cases run after this one


# ----- cases that need their own coordinator ------------------------------------------------------------------
def test_streamed_body_under_the_limit_is_accepted(client: TestClient, tokens: dict[str, str]) -> None:
    """The streamed-oversize cases above are meaningful: a streamed body is read fine when small."""
    def body() -> Iterator[bytes]:
        yield b'{"kind": "collector",'
        yield b' "name": "streamed"}'
    resp = client.post("/v1/workers", content=body(), headers={**auth(tokens["collector"]),
                                                                "Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text


def test_body_exactly_at_the_limit_is_not_413(coordinator_settings: CoordinatorSettings,
                                              tokens: dict[str, str]) -> None:
    settings = coordinator_settings.model_copy(update={"max_body_bytes": 2048})
    with running_client(settings) as limited:
        body = json.dumps({"kind": "collector", "name": "h"})
        body = body[:-1] + " " * (2048 - len(body)) + "}"
        assert len(body) == 2048
        resp = limited.post("/v1/workers", content=body.encode(), headers={**auth(tokens["collector"]),
                                                                            "Content-Type": "application/json"})
        assert resp.status_code == 200, resp.text
        resp = limited.post("/v1/workers", content=(body + " ").encode(),
                            headers={**auth(tokens["collector"]), "Content-Type": "application/json"})
        assert_error_body(resp, 413, "payload_too_large")


def test_a_collectors_task_carries_the_body_limit(coordinator_settings: CoordinatorSettings,
                                                  tokens: dict[str, str]) -> None:
    """The uploader splits its batches of chunk reports below this: it must be the limit the server applies."""
    settings = coordinator_settings.model_copy(update={"max_body_bytes": 65_536})
    with running_client(settings) as limited:
        collector = register(limited, tokens["collector"], "collector")
        assert claim(limited, tokens["collector"], collector)["task"]["max_body_bytes"] == 65_536


def test_huge_episode_returns_do_not_break_status(coordinator_settings: CoordinatorSettings, tokens: dict[str, str],
                                                  store: Any) -> None:
    with running_client(coordinator_settings, tolerate_shutdown_errors=True) as fresh:
        collector = register(fresh, tokens["collector"], "collector")
        claim(fresh, tokens["collector"], collector)
        report = write_chunk(store, "collector-0", "huge", collector, episodes=((1.0, 4), (1.0, 4)))
        report["episodes"] = [{"ret": 1e308, "length": 4}, {"ret": 1e308, "length": 4}]
        resp = fresh.post("/v1/chunks", json=report, headers=auth(tokens["collector"]))
        assert resp.status_code == 422, resp.text  # bounded at the door, so means can never overflow
        # either rejected at the door or accepted; the run must stay observable either way
        assert fresh.get("/v1/status", headers=auth(tokens["read"])).status_code == 200
        assert fresh.get("/metrics").status_code == 200
