"""`rlfleet export`: a trained policy as an ONNX or TorchScript model (shared/policy/export.py), for programs that
run it without rlfleet."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rlfleet.launcher.errors import UserError, missing

if TYPE_CHECKING:
    from rlfleet.shared.policy.export import Format


def export_command(source: Path, out: Path, fmt: Format) -> None:
    """Write the model and say what it takes and returns; UserError for a policy or an output it cannot export."""
    from rlfleet.shared.policy.export import ExportError, export_policy, signature
    from rlfleet.shared.policy.predictor import PolicyFileError, read_policy_file, resolve_policy_file

    try:
        policy = resolve_policy_file(source)
        manifest, state = read_policy_file(policy)
        export_policy(manifest, state, fmt, out)
    except FileNotFoundError as exc:
        raise UserError(missing(exc)) from exc
    except (PolicyFileError, ExportError) as exc:
        raise UserError(str(exc)) from exc
    except IsADirectoryError as exc:
        raise UserError(f"{out} is a directory: give the file to write, e.g. {out / ('policy.' + _suffix(fmt))}") \
            from exc
    typer.echo(f"wrote {out} ({fmt}) from {policy}: {signature(manifest)} (raw observations in, env actions out)")


def _suffix(fmt: str) -> str:
    return "onnx" if fmt == "onnx" else "pt"
