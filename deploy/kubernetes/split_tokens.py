"""Split a tokens file (`rlfleet secrets --out DIR/tokens.json`) into one file per worker scope beside it.

    python3 deploy/kubernetes/split_tokens.py deploy/kubernetes/overlays/example/secrets/tokens.json

writes collector.token, learner.token and evaluator.token (the token alone, no newline, mode 0600) next to
tokens.json, which is what the overlay's secretGenerator reads: one Secret per scope, so each worker gets only
its own token, while the coordinator gets tokens.json with every scope. Standard library only, so it runs with any
Python 3; the checks are those of shared/tokens.py.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path

WORKER_SCOPES = ("collector", "learner", "evaluator")
ALL_SCOPES = (*WORKER_SCOPES, "admin", "read")


def read_tokens(path: Path) -> dict[str, str]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read tokens file {path}: {exc}; create it with "
                         f"`rlfleet secrets --out {path}`") from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) and len(v) >= 16 for v in raw.values()):
        raise ValueError(f"tokens file {path} must map scope names to tokens of at least 16 characters")
    unknown = set(raw) - set(ALL_SCOPES)
    if unknown:
        raise ValueError(f"tokens file {path} has unknown scopes {sorted(unknown)}; known: {list(ALL_SCOPES)}")
    missing = [scope for scope in WORKER_SCOPES if scope not in raw]
    if missing:
        raise ValueError(f"tokens file {path} has no token for {missing}")
    return raw


def _write_private(path: Path, text: str) -> None:
    """Replace `path` atomically by a file of mode 0600 holding exactly `text`."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def split_tokens(tokens_file: Path) -> list[Path]:
    """Write `<scope>.token` beside `tokens_file` for every worker scope; returns the files written."""
    tokens = read_tokens(tokens_file)
    written = []
    for scope in WORKER_SCOPES:
        out = tokens_file.with_name(f"{scope}.token")
        _write_private(out, tokens[scope])  # no trailing newline: the Secret's value is the token itself
        written.append(out)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        written = split_tokens(Path(argv[0]))
    except ValueError as exc:
        print(f"split_tokens: {exc}", file=sys.stderr)
        return 1
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
