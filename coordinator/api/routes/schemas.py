"""The file contracts as JSON Schemas (shared/payloads/contracts.py): public, like /openapi.json, which links them.

A third party writing its own collector reads these before it holds a token; they describe formats, never
run data. Built once per process: they depend on the code only.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from fastapi import APIRouter, Path

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import route_doc
from rlfleet.coordinator.errors import NotFound
from rlfleet.shared.payloads.contracts import SCHEMAS
from rlfleet.shared.wire import SchemaInfo

router = APIRouter(prefix="/v1/schemas", tags=["schemas"])


@cache
def _schema(name: str) -> dict[str, Any]:
    return SCHEMAS[name]()


@router.get("", response_model=list[SchemaInfo], summary="The published file contracts (JSON Schemas)",
            **route_doc(None, "The file contracts a third-party worker needs: their names, versions and URLs.",
                        response=ex.SCHEMAS))
async def listing() -> list[SchemaInfo]:
    return [SchemaInfo(name=name, version=_schema(name)["version"], title=_schema(name)["title"],
                       url=f"/v1/schemas/{name}") for name in SCHEMAS]


@router.get("/{name}", summary="One file contract as a JSON Schema (draft 2020-12)",
            **route_doc(None, "`chunk`: the chunk payload file a collector writes (msgpack; the schema shows its "
                        "decoded document, bin as base64). `policy`: the manifest in a policy file's safetensors "
                        "metadata, and the tensor layout. Generated from the code that reads these files.",
                        ("not_found", "invalid"), response={"$schema": "https://json-schema.org/draft/2020-12/schema",
                                                  "title": "rlfleet.chunk payload v1", "version": 1}))
async def schema(name: Annotated[str, Path(description="a name from GET /v1/schemas", examples=["chunk"])]
                 ) -> dict[str, Any]:
    if name not in SCHEMAS:
        raise NotFound(f"no schema {name!r}; published: {sorted(SCHEMAS)}")
    return _schema(name)
