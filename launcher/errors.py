"""User errors on the command line: one line per problem, exit 2, no traceback.

A person who mistypes a config key, a path or a config name needs the field, the value and what to write instead,
not a 55-line traceback with the answer at its end. Commands turn what the user got wrong (a config's YAML or
validation errors, a file they named that is missing) into a `UserError`; `CliGroup` prints each of its lines as
`rlfleet <command>: <line>` on stderr and exits 2, as it does click's own usage errors (an unknown option, a value
not among the choices). Anything else is a bug and keeps its traceback, as does every error under `--debug`: a
FileNotFoundError deep inside a service is one too, so only the places that read what the user named convert it.
"""

from __future__ import annotations

import os
from typing import Any

import typer
from typer.core import TyperGroup

try:  # typer 0.2x runs its own copy of click: its commands raise that copy's exceptions
    from typer._click import Context, echo
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # typers that run on click itself
    from click import Context, echo  # type: ignore[assignment]
    from click.exceptions import NoArgsIsHelpError, UsageError  # type: ignore[assignment]

EXIT_USAGE = 2
DEBUG = "rlfleet.debug"  # ctx.meta key: `rlfleet --debug`, user errors keep their traceback


class UserError(Exception):
    """Input the user must change, said in one or more lines: each names what is wrong and what to do."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def unreachable(url: str, exc: Exception) -> str:
    """The line for a coordinator that does not answer."""
    return (f"cannot reach the coordinator at {url} ({type(exc).__name__}: {exc}): is the run up? Start it with "
            f"`rlfleet up`, or give its address with --url or RLFLEET_COORDINATOR_URL")


class CliGroup(TyperGroup):
    """The `rlfleet` group: runs a command and turns the user errors it raises, and a mistyped option or argument
    of any command, into lines on stderr and exit code 2. Everything a command does runs inside the group's
    `invoke`, its options' parsing too, so this one place covers every command, nested ones (`ctl`) included."""

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise  # the help of a command run without arguments: click prints it
        except UsageError as exc:
            if ctx.meta.get(DEBUG):
                raise
            message = exc.format_message().replace("Value error, ", "").rstrip(".")
            command = " ".join(_names(exc.ctx)) if exc.ctx is not None else ctx.invoked_subcommand or ""
            _say(ctx, [f"{message}; see `rlfleet {command} --help`"], command)
        except UserError as exc:
            if ctx.meta.get(DEBUG):
                raise
            _say(ctx, exc.lines)
        raise typer.Exit(EXIT_USAGE)


def _names(ctx: Context) -> list[str]:
    """The command names of `ctx` below `rlfleet` itself (`ctl set`), whatever the program was called."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return names[::-1]


def _say(ctx: Context, lines: list[str], command: str | None = None) -> None:
    prefix = " ".join(filter(None, ("rlfleet", ctx.invoked_subcommand if command is None else command)))
    for line in lines:
        echo(f"{prefix}: {' '.join(line.split())}", err=True)  # one printed line, whatever the text held


def missing(exc: FileNotFoundError) -> str:
    """The line for a file the user named and that is not there: its name and where a relative one was looked
    for (a FileNotFoundError that names no file already says what is missing)."""
    if exc.filename is None:
        return str(exc)
    return f"no such file or directory: {exc.filename}; check the path (relative paths start from {os.getcwd()})"
