"""`rlfleet status`: the run's status for a person (or as JSON), with the read token of the tokens file."""

from __future__ import annotations

from pathlib import Path

import typer


def show_status(url: str, tokens_file: Path, as_json: bool) -> int:
    """Print the status; 2 with one line on stderr when the coordinator cannot be reached or refuses."""
    import httpx

    from rlfleet.launcher.progress import describe
    from rlfleet.shared.tokens import load_tokens_file
    from rlfleet.shared.wire import Status

    token = load_tokens_file(tokens_file)["read"] if tokens_file.exists() else ""
    try:
        resp = httpx.get(f"{url.rstrip('/')}/v1/status", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    except httpx.HTTPError as exc:
        typer.echo(f"cannot reach the coordinator at {url}: {exc}", err=True)
        return 2
    if resp.status_code != 200:
        typer.echo(f"HTTP {resp.status_code}: {resp.text}", err=True)
        return 2
    st = Status.model_validate_json(resp.content)
    if as_json:
        typer.echo(st.model_dump_json(indent=2))
        return 0
    typer.echo(f"run {st.run_name}: {st.run_state} ({st.run_message})")
    typer.echo(describe(st))
    for w in st.workers:
        typer.echo(f"  {w.kind:9} {w.worker_id:24} task {w.task_id or '-':12} seen {w.last_seen_seconds_ago:.1f}s ago")
    return 0
