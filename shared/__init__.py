"""Code common to every rlfleet service, one package per concern: `wire` (the REST models; import them from
shared.wire), `config` (the run config, pure validation, and the preflight that builds the env before a run),
`algorithms` (the registry), `envs`, `payloads` (spaces, chunk schema and codec, contracts, recorded datasets),
`policy` (manifest, files, networks, actors), `storage` (store protocol, local and S3 stores, layout) and
`worker` (settings, HTTP client, session, process life); `ids`, `stats` and `tokens` are single modules that
several of them and the services share.

Kept free of heavy imports at package level (every subpackage's too) so the coordinator can use it without
loading torch or gymnasium.

Two import-time settings live here, because every service imports this package before anything they affect.
Both trim what each process pays at start-up, when five of them share the cores:

* httpx's package imports its command-line client (httpx._main) whenever click, rich and pygments are
  installed, as typer's dependencies make them: ~50 ms of CPU. No rlfleet process runs httpx's CLI (the
  `httpx` command is a process of its own), so that import is refused; httpx then defines its stub `main`.
* FIELD_DOCS: the config and wire models turn attribute docstrings into field descriptions, which pydantic
  reads from the source as each class is built (~0.1 s of CPU per process on Python 3.11). Only a schema
  needs them (the coordinator's OpenAPI document), so the workers' entry points set RLFLEET_FIELD_DOCS=0.
"""

import os
import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
FIELD_DOCS = os.environ.get("RLFLEET_FIELD_DOCS", "1") != "0"
