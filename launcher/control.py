"""`rlfleet ctl`: the control plane's REST calls from the command line, with the admin token."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import typer

from rlfleet.launcher.errors import unreachable
from rlfleet.shared.tokens import load_tokens_file


class ControlError(RuntimeError):
    """The coordinator could not be reached or refused the command (the message says why)."""


def admin_token(tokens_file: Path) -> str:
    try:
        return load_tokens_file(tokens_file)["admin"]
    except (ValueError, KeyError) as exc:
        raise ControlError(f"no admin token in {tokens_file}: {exc}") from exc


def command(url: str, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One control-plane call; the coordinator's JSON reply, or ControlError with its error message."""
    try:
        resp = httpx.request(method, f"{url.rstrip('/')}/v1/run/{path}", json=body, timeout=10,
                             headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise ControlError(unreachable(url, exc)) from exc
    if resp.status_code != 200:
        try:
            detail = resp.json()
            message = f"{detail['error']}: {detail['message']}"
        except (ValueError, KeyError, TypeError):
            message = resp.text[:500]
        raise ControlError(f"HTTP {resp.status_code} {message}")
    reply: dict[str, Any] = resp.json()
    return reply


def describe(control: dict[str, Any]) -> str:
    """A few lines for a person: the control state after the command."""
    lines = [f"collection {'paused' if control['paused'] else 'running'}; checkpoints asked {control['checkpoints']}, "
             f"evaluations {control['evaluations']} (tests {control['tests']}); "
             + ("reproducible" if control["reproducible"] else
                "not reproducible (settings changed or a checkpoint loaded)")]
    lines += [f"  {c['key']}: {c['old']} -> {c['new']} at {c['env_steps']} env steps" for c in control["changes"]]
    lines += [f"  loaded {load['source']}/checkpoints/{load['checkpoint']} at {load['env_steps']} env steps"
              for load in control["loads"]]
    if control["load_refusals"]:
        lines.append(f"checkpoint loads refused as incompatible: {control['load_refusals']}")
    lines.append(f"live settings: {', '.join(control['live_settings'])}")
    return "\n".join(lines)


def run_command(url: str, tokens_file: Path, method: str, path: str, body: dict[str, Any] | None = None) -> int:
    """`rlfleet ctl PATH`: the call, and the control state (or the run's state) it leaves; 2 with one line on
    stderr when it fails."""
    try:
        reply = command(url, admin_token(tokens_file), method, path, body)
    except ControlError as exc:
        typer.echo(f"rlfleet ctl {path}: {exc}", err=True)
        return 2
    typer.echo(describe(reply) if "paused" in reply else f"run {reply['run_name']}: {reply['run_state']}")
    return 0


def set_settings(url: str, tokens_file: Path, settings: list[str]) -> int:
    """`rlfleet ctl set KEY=VALUE...`: settings parsed as config overrides are, refused before any call if
    malformed."""
    from rlfleet.coordinator.overrides import parse_overrides

    try:
        values = parse_overrides(";".join(settings))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="SETTINGS") from exc
    return run_command(url, tokens_file, "PATCH", "settings", {"settings": values})


def load_checkpoint(url: str, tokens_file: Path, source: Path, checkpoint: str | None) -> int:
    """`rlfleet ctl load-checkpoint SOURCE`: a fresh request id, so each command loads (the coordinator answers
    a repeated id without loading again)."""
    return run_command(url, tokens_file, "POST", "load-checkpoint", {
        "request_id": uuid.uuid4().hex, "source": str(source.resolve()), "checkpoint": checkpoint})
