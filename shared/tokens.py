"""Scoped bearer tokens: one random token per scope, kept in a JSON file (mode 0600) or in the environment."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Literal

Scope = Literal["collector", "learner", "evaluator", "admin", "read"]
SCOPES: tuple[Scope, ...] = ("collector", "learner", "evaluator", "admin", "read")


def generate_tokens_file(path: Path) -> dict[str, str]:
    """Create the file with fresh tokens unless it exists; returns its contents. Safe to call repeatedly."""
    if path.exists():
        return load_tokens_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens: dict[str, str] = {scope: secrets.token_urlsafe(32) for scope in SCOPES}
    # A fresh, exclusive temp file: a leftover with looser permissions can never be reused.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(tokens, fh)
    os.replace(tmp, path)
    return tokens


def load_tokens_file(path: Path) -> dict[str, str]:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read tokens file {path}: {exc}; create it with `rlfleet secrets`") from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) and len(v) >= 16 for v in raw.values()):
        raise ValueError(f"tokens file {path} must map scope names to tokens of at least 16 characters")
    unknown = set(raw) - set(SCOPES)
    if unknown:
        raise ValueError(f"tokens file {path} has unknown scopes {sorted(unknown)}; known: {list(SCOPES)}")
    return raw
