"""What `--config` names, and reading it: a YAML file, or a config shipped with rlfleet by name (configs/ in the
repository, package data in a wheel: `rlfleet configs` lists them), with one line per problem when it cannot be
read. So `rlfleet up` works from any directory after `pip install`, with the configs that version was tested with.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from rlfleet.coordinator.overrides import parse_overrides
from rlfleet.launcher.errors import UserError, missing
from rlfleet.shared.config.hints import did_you_mean
from rlfleet.shared.config.problems import config_problems
from rlfleet.shared.config.run_config import RunConfig, load_run_config

# The repository's configs/, or rlfleet/configs/ in a wheel: both sit beside this package's folder.
CONFIGS = Path(__file__).resolve().parent.parent / "configs"
YAML_SUFFIXES = (".yaml", ".yml")


def shipped_configs() -> dict[str, Path]:
    """Name -> file of the configs shipped with rlfleet: the file's stem with dashes (my_run.yaml would be my-run)."""
    return {path.stem.replace("_", "-"): path for path in sorted(CONFIGS.glob("*.yaml"))}


def config_file(value: str) -> Path:
    """The run config `--config VALUE` names: a path (an existing file, or anything with a directory or a .yaml
    suffix: whoever reads it says when it is missing), else a shipped config's name (`_` and `-` alike).
    UserError listing the shipped configs for a name that is none of them."""
    path = Path(value).expanduser()
    if path.exists() or len(path.parts) > 1 or path.suffix in YAML_SUFFIXES:
        return path
    shipped = shipped_configs()
    found = shipped.get(value.replace("_", "-"))
    if found is not None:
        return found
    listed = f"the shipped configs are {', '.join(shipped)}" if shipped else f"no configs are shipped in {CONFIGS}"
    raise UserError(f"--config {value}: no config of that name{did_you_mean(value, shipped)} and no such file; "
                    f"{listed}, or give a path to a YAML file")


def read_config(path: Path, overrides: list[str] | None = None) -> RunConfig:
    """The run config of `path` with `--set` overrides applied; UserError with one line per problem."""
    try:
        parsed = parse_overrides(";".join(overrides or []))
    except ValueError as exc:
        raise UserError(f"--set: {exc}") from exc
    try:
        return load_run_config(path, parsed)
    except yaml.MarkedYAMLError as exc:
        raise UserError(yaml_problem(path, exc)) from exc
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML: {exc}") from exc
    except ValidationError as exc:
        raise UserError(*(f"{path}: {line}" for line in config_problems(exc, RunConfig))) from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not a text file ({exc.reason} at byte {exc.start}): give a run config YAML "
                        f"file") from exc
    except FileNotFoundError as exc:
        raise UserError(missing(exc)) from exc
    except IsADirectoryError as exc:
        raise UserError(f"--config {path} is a directory: give a run config YAML file") from exc
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from exc


def yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    """'file:line:column: YAML syntax error: what (where it began); fix ...', the line and column from 1."""
    mark = exc.problem_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    began = ""
    if exc.context and exc.context_mark is not None:
        began = f" ({exc.context} at line {exc.context_mark.line + 1})"
    return f"{where}: YAML syntax error: {exc.problem}{began}; fix the YAML there (indentation, a missing ':' or " \
           f"closing bracket, or quotes around a value with ': ' or '#')"
