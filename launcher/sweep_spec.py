"""A sweep spec (`rlfleet sweep SPEC.yaml`): what to tune, how, and how a trial is scored, checked in full before
any trial starts.

A sweep that dies on its fifth trial because a range ends where a setting's bound begins, or that tunes a setting
nobody reads because its name was misspelt, wastes hours. So the spec is validated against the run config it
tunes: every searched setting must be a field of the base config (a misspelt one is refused with the close
matches), its range must sit inside the field's own bounds (the pydantic constraints: the refusal names the
bound), its type must fit the field, and the base config must load with every corner of the search space applied
(rules across fields, such as a chunk that must fit in the buffer, only show in whole configs).

The objective is a held-out test or the time to a confirmed solve, never a validation return: a tuner that
selects on validation scores overfits them, which is what the held-out test exists to prevent. Validations only
feed the pruner, which stops trials whose curves trail the others'.
"""

from __future__ import annotations

import itertools
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo

from rlfleet.launcher.configs import read_config
from rlfleet.launcher.errors import UserError
from rlfleet.launcher.spec_files import SpecModel, base_config_path, check_range, override, read_spec
from rlfleet.shared.config.hints import did_you_mean
from rlfleet.shared.config.run_config import RunConfig

MAX_CORNERS = 1024  # beyond this many corners of the space, each extreme is checked on its own
STUDY_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"


class FloatRange(SpecModel):
    type: Literal["float"]
    low: float
    high: float
    log: bool = Field(False, description="sample on a log scale (learning rates): low must be > 0")

    @model_validator(mode="after")
    def _ordered(self) -> FloatRange:
        check_range(self.low, self.high, self.log)
        return self


class IntRange(SpecModel):
    type: Literal["int"]
    low: int
    high: int
    log: bool = Field(False, description="sample on a log scale: low must be >= 1")

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        check_range(self.low, self.high, self.log)
        return self


class Choice(SpecModel):
    type: Literal["categorical"]
    choices: list[Any] = Field(min_length=1, description="the values to try: numbers, strings, booleans, null")

    @field_validator("choices")
    @classmethod
    def _scalars(cls, choices: list[Any]) -> list[Any]:
        """Optuna stores a categorical choice as a number, a string, a boolean or null, nothing else."""
        for choice in choices:
            if choice is not None and not isinstance(choice, str | int | float | bool):
                raise ValueError(f"choice {choice!r} is a {type(choice).__name__}: categorical choices are numbers, "
                                 f"strings, booleans or null: a list-valued setting cannot be searched (sweep one "
                                 f"spec per value instead, with it under `set`)")
        return choices


Parameter = Annotated[FloatRange | IntRange | Choice, Field(discriminator="type")]


class HeldOutObjective(SpecModel):
    """The held-out test score of the run's best policy, as its journal records it: maximized."""

    kind: Literal["test"]


class TimeToSolve(SpecModel):
    """Env steps (or seconds) until a held-out test confirmed the solve: minimized; a trial that does not solve
    counts as its whole budget (budget.max_env_steps or budget.max_wall_seconds)."""

    kind: Literal["time_to_solve"]
    unit: Literal["env_steps", "seconds"] = "env_steps"


Objective = Annotated[HeldOutObjective | TimeToSolve, Field(discriminator="kind")]


class Sampler(SpecModel):
    kind: Literal["tpe"] = "tpe"
    seed: int = Field(0, ge=0, description="seeds the sampler: the same spec proposes the same settings")
    startup_trials: int = Field(4, ge=1, description="random trials before TPE models the results")


class Pruner(SpecModel):
    kind: Literal["median", "none"] = "median"
    startup_trials: int = Field(2, ge=0, description="finished trials before any trial may be pruned")
    warmup_env_steps: int = Field(20_000, ge=0, description="no trial is pruned before this many env steps")
    interval_env_steps: int = Field(
        5_000, ge=1, description="the curve the pruner compares: the best validation mean by every multiple of "
                                 "this many env steps")


class SweepSpec(SpecModel):
    base_config: str = Field(description="the run config each trial starts from: a YAML file (relative to the "
                                         "spec) or a shipped config's name")
    study: str = Field(pattern=STUDY_NAME, description="the Optuna study's name")
    trials: int = Field(ge=1, le=10_000, description="finished trials the study is run to (resumes count those "
                                                     "already finished)")
    parallel: int = Field(1, ge=1, le=64, description="trials running at once")
    objective: Objective = Field(description="what a trial scores: `test` or `time_to_solve`")
    space: dict[str, Parameter] = Field(min_length=1, description="dotted run-config path -> its search range")
    set: dict[str, Any] = Field({}, description="fixed overrides every trial gets (a smaller budget, say)")
    output_dir: str | None = Field(None, description="where trials, tables and the plot go [sweeps/<study>]")
    storage: str | None = Field(None, description="Optuna storage URL [sqlite:///<output_dir>/study.db]")
    sampler: Sampler = Sampler()
    pruner: Pruner = Pruner()

    @property
    def direction(self) -> Literal["maximize", "minimize"]:
        return "maximize" if self.objective.kind == "test" else "minimize"


class Sweep(BaseModel):
    """A validated spec with its resolved paths: what the study driver runs."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: SweepSpec
    spec_path: Path
    base_path: Path
    base: RunConfig
    output_dir: Path
    storage: str

    @property
    def fixed(self) -> list[str]:
        """The spec's `set` as `--set` overrides, the same for every trial."""
        return [override(key, value) for key, value in self.spec.set.items()]


def load_sweep(path: Path) -> Sweep:
    """Read and check a sweep spec; UserError with one line per problem, before anything is started."""
    spec = read_spec(path, SweepSpec, "a sweep spec", "base_config, study, trials, objective, space")
    base_path = base_config_path(path, spec.base_config)
    fixed = [override(k, v) for k, v in spec.set.items()]
    try:
        base = read_config(base_path, fixed)
    except UserError as exc:  # the base config itself, or a fixed setting of `set`
        raise UserError(*(f"{path}: base_config with set: {line}" for line in exc.lines)) from exc
    problems = [line for key, parameter in spec.space.items() for line in check_parameter(base, key, parameter)]
    problems += [f"set: {key} is both fixed (set) and searched (space): keep it in one"
                 for key in spec.set if key in spec.space]
    if not problems:
        problems = corner_problems(base_path, fixed, spec.space)
    if problems:
        raise UserError(*(f"{path}: {line}" for line in problems))
    output_dir = Path(spec.output_dir) if spec.output_dir else Path("sweeps") / spec.study
    storage = spec.storage or f"sqlite:///{(output_dir / 'study.db').resolve()}"
    return Sweep(spec=spec, spec_path=path, base_path=base_path, base=base, output_dir=output_dir.resolve(),
                 storage=storage)


def settings_of(model: BaseModel, prefix: str = "") -> list[str]:
    """Every dotted setting of a loaded config, sections included (what a space key may name)."""
    names = []
    for key in type(model).model_fields:
        name = f"{prefix}{key}"
        names.append(name)
        value = getattr(model, key)
        if isinstance(value, BaseModel):
            names += settings_of(value, f"{name}.")
    return names


def _field(base: RunConfig, key: str) -> FieldInfo:
    """The pydantic field a dotted key names in `base` (its algorithm's own parameters under `algo.`); KeyError
    with a line naming the close matches when there is none."""
    node: Any = base
    parts = key.split(".")
    for i, part in enumerate(parts):
        fields = type(node).model_fields if isinstance(node, BaseModel) else {}
        if part not in fields:
            raise KeyError(f"space: {key}: no such setting in the base config"
                           f"{did_you_mean(key, settings_of(base)) or ' (rlfleet config show lists them)'}")
        if i == len(parts) - 1:
            return fields[part]
        node = getattr(node, part)
    raise AssertionError("unreachable: a key has at least one part")


def _types(annotation: Any) -> set[type]:
    """The plain types a field's annotation admits (Optional, unions and Annotated unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_types(arg) for arg in typing.get_args(annotation)))
    return {origin or annotation}


def bounds(info: FieldInfo) -> list[tuple[str, float]]:
    """The field's numeric constraints as (operator, bound): ('>=', 1), ('<', 1.0), ..."""
    found = []
    for item in info.metadata:
        for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(item, getattr(annotated_types, attr.capitalize())):
                found.append((op, getattr(item, attr)))
    return found


def _inside(value: float, op: str, bound: float) -> bool:
    return {">=": value >= bound, ">": value > bound, "<=": value <= bound, "<": value < bound}[op]


def check_parameter(base: RunConfig, key: str, parameter: FloatRange | IntRange | Choice) -> list[str]:
    """What is wrong with searching `key` over `parameter`: no such setting, a type the field does not take, a
    range beyond the field's bounds. Empty when it fits."""
    try:
        info = _field(base, key)
    except KeyError as exc:
        return [str(exc.args[0])]
    if isinstance(parameter, Choice):
        return []
    admits = _types(info.annotation)
    if isinstance(parameter, FloatRange) and float not in admits:
        kind = "an integer" if int in admits else f"a {'/'.join(sorted(t.__name__ for t in admits))}"
        return [f"space: {key} is {kind} setting, not a float: use type: int (or categorical)"]
    if isinstance(parameter, IntRange) and not admits & {int, float}:
        return [f"space: {key} is a {'/'.join(sorted(t.__name__ for t in admits))} setting, not a number: use type: "
                f"categorical"]
    problems = []
    for op, bound in bounds(info):
        for end, value in (("low", parameter.low), ("high", parameter.high)):
            if not _inside(value, op, bound):
                problems.append(f"space: {key}: {end} {value} is outside the setting's bound ({key} {op} {bound}): "
                                f"keep the range within it")
    return problems


def extremes(parameter: FloatRange | IntRange | Choice) -> list[Any]:
    return list(parameter.choices) if isinstance(parameter, Choice) else [parameter.low, parameter.high]


def corner_problems(base_path: Path, fixed: list[str], space: dict[str, FloatRange | IntRange | Choice]) -> list[str]:
    """Load the base config with each corner of the space (every combination of extremes: cross-field rules need
    whole configs), or each extreme alone when there are more than MAX_CORNERS; one line per failing corner."""
    keys = list(space)
    values = [extremes(space[k]) for k in keys]
    if _count(values) <= MAX_CORNERS:
        corners = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]
    else:
        corners = [{k: v} for k, vs in zip(keys, values, strict=True) for v in vs]
    problems: list[str] = []
    for corner in corners:
        try:
            read_config(base_path, fixed + [override(k, v) for k, v in corner.items()])
        except UserError as exc:
            where = ", ".join(f"{k}={v}" for k, v in corner.items())
            problems += [f"space: the base config does not load with {where}: "
                         f"{line.removeprefix(f'{base_path}: ')}" for line in exc.lines]
        if len(problems) >= 10:  # the first few say what to change; hundreds would hide them
            break
    return problems


def _count(values: list[list[Any]]) -> int:
    total = 1
    for vs in values:
        total *= len(vs)
    return total
