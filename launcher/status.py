"""`rlfleet status`: the run's status for a person (or as JSON), with the read token of the tokens file."""

from __future__ import annotations

from pathlib import Path

import typer

from rlfleet.launcher.errors import UserError, unreachable


def show_status(url: str, tokens_file: Path, as_json: bool) -> int:
    """Print the status; UserError (one line, exit 2) when the tokens file is unreadable or the coordinator cannot
    be reached or refuses."""
    import httpx

    from rlfleet.launcher.progress import describe
    from rlfleet.shared.tokens import load_tokens_file
    from rlfleet.shared.wire import Status

    try:
        token = load_tokens_file(tokens_file)["read"] if tokens_file.exists() else ""
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    try:
        resp = httpx.get(f"{url.rstrip('/')}/v1/status", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    except httpx.HTTPError as exc:
        raise UserError(unreachable(url, exc)) from exc
    if resp.status_code != 200:
        hint = f"; give the run's tokens file with --tokens-file (now {tokens_file})" if resp.status_code == 401 else ""
        raise UserError(f"the coordinator at {url} answered HTTP {resp.status_code}: {resp.text[:300]}{hint}")
    st = Status.model_validate_json(resp.content)
    if as_json:
        typer.echo(st.model_dump_json(indent=2))
        return 0
    typer.echo(f"run {st.run_name}: {st.run_state} ({st.run_message})")
    typer.echo(describe(st))
    for w in st.workers:
        typer.echo(f"  {w.kind:9} {w.worker_id:24} task {w.task_id or '-':12} seen {w.last_seen_seconds_ago:.1f}s ago")
    return 0
