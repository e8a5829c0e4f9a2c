"""Scoped bearer tokens: one random token per scope, kept in a JSON file (mode 0600) or in the environment."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Literal

Scope = Literal["collector", "learner", "evaluator", "admin", "read"]
SCOPES: tuple[Scope, ...] = ("collector", "learner", "evaluator", "admin", "read")


MIN_TOKEN_CHARS = 16


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh, exclusive temp file: a leftover with looser permissions can never be reused.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def new_token() -> str:
    """256 random bits in hex. Not base64url: one of its tokens in 64 starts with "-", and a command line such as
    `--token -0BEY...` then reads the token as an option."""
    return secrets.token_hex(32)


def generate_tokens_file(path: Path) -> dict[str, str]:
    """Create the file with fresh tokens unless it exists; returns its contents. Safe to call repeatedly."""
    if path.exists():
        return load_tokens_file(path)
    tokens: dict[str, str] = {scope: new_token() for scope in SCOPES}
    _write_private(path, json.dumps(tokens))
    return tokens


def write_token_file(path: Path, token: str) -> None:
    """One scope's token alone (mode 0600): what a service gets that must not read the other scopes' tokens
    (compose mounts each worker's own; the full tokens file stays with the coordinator). Rewritten every time,
    so it always matches the tokens file it was taken from."""
    _write_private(path, token + "\n")


def load_token_file(path: Path) -> str:
    """The token in a file written by `write_token_file` (surrounding whitespace ignored)."""
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ValueError(f"cannot read token file {path}: {exc}; "
                         "create it with `rlfleet secrets --scope-file`") from exc
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ValueError(f"token file {path} must hold one token of at least {MIN_TOKEN_CHARS} characters")
    return token


def load_tokens_file(path: Path) -> dict[str, str]:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read tokens file {path}: {exc}; create it with `rlfleet secrets`") from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) and len(v) >= MIN_TOKEN_CHARS for v in raw.values()):
        raise ValueError(f"tokens file {path} must map scope names to tokens of at least {MIN_TOKEN_CHARS} characters")
    unknown = set(raw) - set(SCOPES)
    if unknown:
        raise ValueError(f"tokens file {path} has unknown scopes {sorted(unknown)}; known: {list(SCOPES)}")
    return raw
