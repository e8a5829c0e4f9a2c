"""The spec files of the commands that run many runs of one config (`rlfleet sweep`, `rlfleet pbt`): reading one,
finding its base run config, and writing its settings as the `--set` overrides each run is started with.

Both commands refuse a bad spec before any run starts, one line per problem, so reading the file and validating it
against its model must fail the same way for both: a missing file, a directory, YAML that does not parse, a
document that is not a mapping, and each field the model refuses (with the model's own hints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from rlfleet.launcher.configs import config_file
from rlfleet.launcher.errors import UserError, missing
from rlfleet.shared.config.problems import config_problems

Spec = TypeVar("Spec", bound=BaseModel)


class SpecModel(BaseModel):
    """A part of a spec: unknown keys, NaN and infinities refused; never changed once read."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def check_range(low: float, high: float, log: bool) -> None:
    """A search or perturbation range: ValueError saying what to change unless low <= high (and low > 0 on a log
    scale)."""
    if low > high:
        raise ValueError(f"low ({low}) is above high ({high}): give low <= high")
    if log and low <= 0:
        raise ValueError(f"a log range needs low > 0 (got {low}): raise low or set log: false")


def read_spec(path: Path, model: type[Spec], what: str, fields: str) -> Spec:
    """The spec at `path` validated as `model`; UserError naming `what` it is (e.g. "a sweep spec") and its main
    `fields` where the file is not one."""
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise UserError(missing(exc)) from exc
    except IsADirectoryError as exc:
        raise UserError(f"{path} is a directory: give {what} YAML file") from exc
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, dict):
        raise UserError(f"{path}: {what} is a mapping ({fields}, ...)")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise UserError(*(f"{path}: {line}" for line in config_problems(exc, model))) from exc


def base_config_path(spec_path: Path, value: str) -> Path:
    """A file relative to the spec (so a spec beside its config works from any directory), else what `--config`
    would take: a path from here or a shipped config's name."""
    beside = spec_path.parent / value
    if beside.is_file():
        return beside.resolve()
    try:
        return config_file(value)
    except UserError as exc:
        raise UserError(f"{spec_path}: base_config: {exc}") from exc


def override(key: str, value: Any) -> str:
    """`key=value` as `--set` parses it back (YAML flow style: lists and strings survive the round trip)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return f"{key}={text.removesuffix('...').strip()}"
