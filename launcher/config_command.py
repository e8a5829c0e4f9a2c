"""`rlfleet config show` and `rlfleet config schema`: what a run config resolves to, and the schema editors check
it with.

A run config names only what differs from the defaults, and `--set` changes it further, so what a run will
actually do is spread over the file, the overrides and the models' defaults. `show` prints the one config the
coordinator would start with (every field, the env's registered solve threshold filled in), as YAML that loads
back unchanged. `schema` writes the run config's JSON Schema, generated from the same pydantic models that
validate it, for yaml-language-server (VS Code's YAML extension, Neovim, JetBrains): the shipped configs name
the committed copy, docs/reference/run-config.schema.json, in their first line, so editors complete and check
them as they are typed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlfleet.launcher.configs import read_config
from rlfleet.launcher.errors import UserError
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.config.threshold import resolve_threshold

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic's model_json_schema writes
MODELINE_PREFIX = "# yaml-language-server: $schema="


def resolved_config(path: Path, overrides: list[str]) -> str:
    """The run config of `path` with `overrides`, every default included and env.solve_threshold resolved as
    the coordinator resolves it (the env's registration read in a child interpreter), as YAML."""
    config = read_config(path, overrides)
    try:
        config = resolve_threshold(config)
    except ValueError as exc:
        raise UserError(f"{path}: env: {exc}") from exc
    return dump_run_config(config)


def run_config_schema() -> dict[str, Any]:
    """The JSON Schema of a run config as a user writes it (validation mode: what is accepted, defaults shown)."""
    schema = RunConfig.model_json_schema(mode="validation")
    return {"$schema": JSON_SCHEMA_DIALECT, **schema, "title": "rlfleet run config",
            "description": "A run config of rlfleet (rlfleet up --config FILE); every field is optional. "
                           "Written by `rlfleet config schema` from the models that validate it."}


def schema_text() -> str:
    """The schema as the committed file holds it: sorted keys, so a diff shows what changed."""
    return json.dumps(run_config_schema(), indent=1, sort_keys=True) + "\n"


def write_schema(out: Path | None) -> str:
    """Write the schema to `out` (stdout when None); what to print afterwards (the path written, or the schema)."""
    text = schema_text()
    if out is None:
        return text.rstrip("\n")
    try:
        out.write_text(text)
    except OSError as exc:
        raise UserError(f"cannot write the schema to {out} ({exc.strerror}): give a writable file path") from exc
    return str(out)
