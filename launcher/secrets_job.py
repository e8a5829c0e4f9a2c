"""`rlfleet secrets`: the tokens job that every other service waits for (compose's `secrets` service).

It writes the scoped bearer tokens file once (kept when it exists, so a restart keeps the fleet's tokens), and,
for a service that must see no other token, one scope's token alone to a file of its own.
"""

from __future__ import annotations

from pathlib import Path

import typer


def write_tokens(out: Path, scope_files: list[str]) -> None:
    """Create `out` unless it exists, then each SCOPE=PATH file; a malformed SCOPE=PATH is refused before anything
    is written."""
    from rlfleet.shared.tokens import SCOPES, generate_tokens_file, write_token_file

    targets: list[tuple[str, Path]] = []
    for item in scope_files:
        scope, sep, where = item.partition("=")
        if not sep or scope not in SCOPES or not where:
            raise typer.BadParameter(f"{item!r} must look like SCOPE=PATH with SCOPE one of {', '.join(SCOPES)}",
                                     param_hint="--scope-file")
        targets.append((scope, Path(where)))
    tokens = generate_tokens_file(out)
    for scope, path in targets:
        write_token_file(path, tokens[scope])
    typer.echo(f"tokens in {out}" + "".join(f"; {scope} token in {path}" for scope, path in targets))
