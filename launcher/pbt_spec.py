"""A population-based training spec (`rlfleet pbt SPEC.yaml`): the population, how often and how its members
exploit and explore, and the live settings it perturbs, checked in full before any member starts.

PBT changes settings of running runs through the control plane (`PATCH /v1/run/settings`), so every setting in
its space must be one the run's algorithm declares live (`AlgorithmSpec.live`): a setting that only takes effect
at start would be "perturbed" in status and nowhere else. A misspelt setting is refused with the close matches
among the run config's fields, and each range must sit inside the field's own bounds (the run config is loaded
with both ends applied: the refusal names the bound), so no perturbation can later be refused mid-run.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlfleet.launcher.configs import read_config
from rlfleet.launcher.errors import UserError
from rlfleet.launcher.spec_files import SpecModel, base_config_path, check_range, override, read_spec
from rlfleet.shared.algorithms import spec_of
from rlfleet.shared.config.hints import did_you_mean
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.ids import ID_PATTERN


class Range(SpecModel):
    """A live setting's range: initial values are drawn from it, perturbed values are clipped into it."""

    low: float
    high: float
    log: bool = Field(False, description="draw on a log scale (learning rates): low must be > 0")
    integer: bool = Field(False, description="round drawn and perturbed values to integers")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        check_range(self.low, self.high, self.log)
        return self

    def draw(self, rng: random.Random) -> float:
        value = (math.exp(rng.uniform(math.log(self.low), math.log(self.high))) if self.log
                 else rng.uniform(self.low, self.high))
        return self.fit(value)

    def fit(self, value: float) -> float:
        """`value` clipped into the range (and rounded, for an integer setting)."""
        value = min(self.high, max(self.low, value))
        return float(round(value)) if self.integer else value


class Explore(SpecModel):
    factors: tuple[float, float] = Field((0.8, 1.2), description=(
        "a copied member's settings are each multiplied by one of these, drawn with equal chance"))
    resample_probability: float = Field(0.25, ge=0, le=1, description=(
        "the chance that a setting is drawn afresh from its range instead of multiplied"))


class HeldOutTest(SpecModel):
    episodes: int = Field(100, ge=1, le=100_000, description="greedy episodes of the final held-out test")
    num_envs: int = Field(10, ge=1, le=256, description="envs they are split over (episodes must be a multiple)")

    @model_validator(mode="after")
    def _even(self) -> HeldOutTest:
        if self.episodes % self.num_envs:
            raise ValueError(f"episodes ({self.episodes}) must be a multiple of num_envs ({self.num_envs})")
        return self


class PbtSpec(SpecModel):
    name: str = Field(pattern=ID_PATTERN, description="the population's name: its output directory's")
    base_config: str = Field(description="the run config every member starts from: a YAML file (relative to the "
                                         "spec) or a shipped config's name")
    population: int = Field(4, ge=2, le=64, description="members trained at once")
    interval_env_steps: int = Field(ge=1, description=(
        "a member is ranked (and, in the bottom quantile, replaced) each time it trains this many env steps"))
    quantile: float = Field(0.25, gt=0, le=0.5, description=(
        "the bottom fraction copies from the top fraction (at least one member each)"))
    score: str = Field("recent_return", pattern=r"^(recent_return|validation)$", description=(
        "what ranks members: `recent_return` (mean training return of the last 100 episodes) or `validation` "
        "(the latest validation mean)"))
    space: dict[str, Range] = Field(min_length=1, description="live setting (dotted run-config path) -> its range")
    explore: Explore = Explore()
    set: dict[str, Any] = Field({}, description="fixed overrides every member gets (the budget, say)")
    collectors: int = Field(1, ge=1, le=64, description="collector processes per member")
    seed: int = Field(0, ge=0, description="member i runs with seed + i; the initial settings and the driver's "
                                           "draws are seeded with it")
    test: HeldOutTest = HeldOutTest()
    output_dir: str | None = Field(None, description="where members, lineage and report go [pbt/<name>]")


class Population(BaseModel):
    """A validated spec with its resolved paths: what the driver runs."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: PbtSpec
    base_path: Path
    base: RunConfig
    output_dir: Path

    def fixed(self) -> list[str]:
        return [override(key, value) for key, value in self.spec.set.items()]

    def initial_settings(self) -> list[dict[str, float]]:
        """Each member's starting values, drawn from the space (seeded: the same spec starts the same members)."""
        rng = random.Random(self.spec.seed)
        return [{key: rng_range.draw(rng) for key, rng_range in self.spec.space.items()}
                for _ in range(self.spec.population)]


def load_population(path: Path, output_dir: Path | None = None) -> Population:
    """Read and check a PBT spec; UserError with one line per problem, before anything starts."""
    spec = read_spec(path, PbtSpec, "a PBT spec", "name, base_config, population, interval_env_steps, space")
    base_path = base_config_path(path, spec.base_config)
    fixed = [override(key, value) for key, value in spec.set.items()]
    base = read_config(base_path, fixed)
    problems = space_problems(base, base_path, fixed, spec.space)
    problems += [f"set: {key} is both fixed (set) and perturbed (space): keep it in one"
                 for key in spec.set if key in spec.space]
    if problems:
        raise UserError(*(f"{path}: {line}" for line in problems))
    out = output_dir or (Path(spec.output_dir) if spec.output_dir else Path("pbt") / spec.name)
    return Population(spec=spec, base_path=base_path, base=base, output_dir=out.resolve())


def space_problems(base: RunConfig, base_path: Path, fixed: list[str], space: dict[str, Range]) -> list[str]:
    """One line per setting of `space` that PBT cannot perturb in runs of `base`."""
    live = spec_of(base.algo).live
    paths = set(_leaf_paths(base.model_dump(mode="json")))
    problems = []
    for key, bounds in space.items():
        if key not in paths:
            problems.append(f"space: {key} is not a setting of {base_path.name}{did_you_mean(key, paths)}")
        elif key not in live:
            problems.append(f"space: {key} cannot change while {base.algo.name} trains, so PBT cannot perturb it; "
                            f"its live settings: {', '.join(live)}")
        else:
            for end in ("low", "high"):
                value = getattr(bounds, end)
                try:
                    read_config(base_path, [*fixed, override(key, int(value) if bounds.integer else value)])
                except UserError as exc:
                    problems += [f"space: {key}.{end} = {value} is outside the setting's bounds: {line}"
                                 for line in exc.lines]
    return problems


def _leaf_paths(doc: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        out += _leaf_paths(value, f"{dotted}.") if isinstance(value, dict) else [dotted]
    return out
