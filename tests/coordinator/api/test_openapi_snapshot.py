"""The REST contract does not drift by accident: the served OpenAPI document equals the one committed at
docs/reference/openapi.json (what third-party collectors are written against, and what the docs site links).

A deliberate change to a route or a wire model updates the file in the same commit:
`python -m rlfleet.coordinator.openapi_file docs/reference/openapi.json`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rlfleet.coordinator.openapi_file import write_openapi
from tests.support.repo import REPO

SNAPSHOT = REPO / "docs" / "reference" / "openapi.json"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("openapi") / "openapi.json"
    write_openapi(out)
    return json.loads(out.read_text())


def test_the_paths_are_the_committed_ones(served: dict[str, Any]) -> None:
    committed = json.loads(SNAPSHOT.read_text())
    assert {p: sorted(item) for p, item in served["paths"].items()} == \
        {p: sorted(item) for p, item in committed["paths"].items()}


def test_the_document_is_the_committed_one(served: dict[str, Any]) -> None:
    committed = json.loads(SNAPSHOT.read_text())
    for name in sorted(set(served["components"]["schemas"]) | set(committed["components"]["schemas"])):
        assert served["components"]["schemas"].get(name) == committed["components"]["schemas"].get(name), name
    assert served == committed
