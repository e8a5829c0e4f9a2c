"""The OpenAPI document stands alone: every operation says what it does, which token scope it needs (the same
scopes the auth matrix of test_api_auth.py enforces), which errors it can answer and with which `error` codes,
and shows an example; every field of every schema has a description."""

from __future__ import annotations

from typing import Any

import pytest

from rlfleet.coordinator.api.apidoc import ERRORS
from tests.support.api import EXPECTED

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/v1/schemas"),
          ("GET", "/v1/schemas/{name}")}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.support.api import make_settings, running_client

    settings, _ = make_settings(tmp_path_factory.mktemp("openapi"))
    with running_client(settings) as client:
        return client.get("/openapi.json").json()


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op) for path, item in spec["paths"].items() for method, op in item.items()]


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def test_every_route_is_documented_as_public_or_in_the_auth_matrix(spec: dict[str, Any]) -> None:
    documented = {(m, p) for m, p, _ in _operations(spec)}
    assert documented == set(EXPECTED) | PUBLIC


def test_every_operation_has_a_description_and_its_scope(spec: dict[str, Any]) -> None:
    for method, path, op in _operations(spec):
        assert len(op.get("description", "")) > 40, (method, path)
        accepted = {role for requirement in op.get("security", []) for roles in requirement.values()
                    for role in roles}
        if (method, path) in PUBLIC:
            assert "security" not in op and "Public" in op["description"], (method, path)
        else:
            assert all(len(r) == 1 and len(next(iter(r.values()))) == 1 for r in op["security"]), (method, path)
            assert accepted == EXPECTED[(method, path)], (method, path, accepted)
            assert "Scope:" in op["description"], (method, path)


def test_every_operation_lists_its_own_errors_with_their_codes(spec: dict[str, Any]) -> None:
    lists = set()
    for method, path, op in _operations(spec):
        errors = {code: r for code, r in op["responses"].items() if code[0] in "45"}
        lists.add(tuple(sorted(errors)))
        public = (method, path) in PUBLIC
        assert ("401" in errors) != public and ("403" in errors) == (
            not public and len(EXPECTED[(method, path)]) < 5), (method, path, sorted(errors))
        for status, response in errors.items():
            body = response["content"]["application/json"]
            assert body["schema"]["$ref"].endswith("/ErrorBody"), (method, path, status)
            examples = body["examples"]
            assert examples and all(ERRORS[code][0] == int(status) for code in examples), (method, path, status)
            assert all(e["value"]["error"] == code for code, e in examples.items()), (method, path, status)
            assert all(f"`{code}`" in response["description"] for code in examples), (method, path, status)
    assert len(lists) >= 8, "routes should list their own errors, not one shared list"


def test_every_operation_has_examples(spec: dict[str, Any]) -> None:
    for method, path, op in _operations(spec):
        content = op["responses"]["200"]["content"]
        ok = content.get("application/json") or content["text/plain"]  # /metrics: Prometheus text
        assert ok.get("example") is not None, (method, path)
        if "requestBody" in op:
            assert op["requestBody"]["content"]["application/json"].get("example"), (method, path)
        for parameter in op.get("parameters", []):
            assert parameter.get("description"), (method, path, parameter["name"])


def test_every_schema_property_has_a_description(spec: dict[str, Any]) -> None:
    missing = [f"{name}.{prop}" for name, schema in spec["components"]["schemas"].items()
               for prop, sub in schema.get("properties", {}).items() if not sub.get("description")]
    assert not missing, f"{len(missing)} properties without a description: {missing}"


def test_server_issued_ids_are_not_called_client_generated(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    for name, prop in [("RegisterResponse", "worker_id"), ("CollectorTask", "task_id"), ("LearnerTask", "buffer_id"),
                       ("SampleResponse", "ids"), ("WorkerStatus", "worker_id")]:
        text = _resolve(spec, schemas[name]["properties"][prop]).get("description", "")
        assert "coordinator" in text and "client-generated" not in text, (name, prop, text)
    for name, prop in [("ChunkReport", "chunk_id"), ("RegisterRequest", "request_id")]:
        text = schemas[name]["properties"][prop]["description"]
        assert "client" in text.lower() or "collector" in text, (name, prop, text)


