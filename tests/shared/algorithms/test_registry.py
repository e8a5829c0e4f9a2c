"""The registries: every algorithm module is found, its entry is complete, and nothing else names it; every loop
kind is used, its parts resolve, and nothing outside its own modules compares its name; nothing compares sampler
names outside the samplers' registry either."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Collection
from pathlib import Path
from typing import get_args

import pytest
from fastapi import APIRouter
from pydantic import BaseModel

from rlfleet.learner_worker.trainer import Trainer
from rlfleet.shared import wire
from rlfleet.shared.algorithms import DEFAULT, REGISTRY, default_params, spec_of
from rlfleet.shared.algorithms.base import (
    AlgoParams,
    ChunkParams,
    DatasetParams,
    PopulationParams,
    ReplayParams,
    SequenceParams,
)
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.config.base import Encoder
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.samplers import SAMPLERS
from rlfleet.shared.loops import LOOPS, loop_of
from rlfleet.shared.loops.kind import LoopKind, resolve
from tests.support.policies import CARTPOLE, PENDULUM
from tests.support.repo import REPO, module_file

SERVICES = ("coordinator", "collector_worker", "learner_worker", "evaluator", "launcher", "shared")


def test_every_algorithm_module_is_registered_under_its_params_name() -> None:
    modules = {p.stem for p in (REPO / "shared" / "algorithms").glob("*.py")} - {"__init__", "base"}
    assert set(REGISTRY) == modules
    for name, spec in REGISTRY.items():
        assert spec.name == name and spec.params.model_fields["name"].default == name
        loop_params = {"replay": ReplayParams, "sequences": SequenceParams, "chunks": ChunkParams,
                       "population": PopulationParams, "dataset": DatasetParams}
        assert issubclass(spec.params, loop_params[spec.loop])
    assert default_params().name == DEFAULT


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_learner_path_imports_and_its_defaults_make_a_valid_run(name: str) -> None:
    spec = REGISTRY[name]
    module, _, attr = spec.learner.partition(":")
    assert callable(getattr(importlib.import_module(module), attr))
    required = {"dataset": "demo"} if issubclass(spec.params, DatasetParams) else {}  # the recording to train on
    params: AlgoParams = spec.params(name=name, **required)
    assert params.model_dump(mode="json")["name"] == name


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_algorithm_declares_a_head_for_the_spaces_it_supports_and_refuses_the_rest(name: str) -> None:
    spec = REGISTRY[name]
    for spaces in (CARTPOLE, PENDULUM):
        try:
            head = spec.head(spaces)
        except ValueError as exc:
            assert name in str(exc) and spaces.action.kind in str(exc)  # names itself and the space
        else:
            assert head in ("q_values", "categorical", "multi_categorical", "gaussian", "tanh_gaussian")


def _python_files() -> list[Path]:
    return [p for top in SERVICES for p in (REPO / top).rglob("*.py")]


# Encoder kinds (`algo.net.encoder.kind`) are a namespace of their own, and one shares its word with an algorithm:
# the IMPALA paper's ResNet. The modules that declare and build encoders may say it; nothing else may.
ENCODER_KINDS = {model.model_fields["kind"].default for model in get_args(get_args(Encoder)[0])}
ENCODER_MODULES = {REPO / "shared" / "config" / "base.py", REPO / "shared" / "policy" / "manifest.py",
                   REPO / "shared" / "policy" / "nets.py", REPO / "shared" / "policy" / "export.py"}


def test_no_module_outside_the_registry_names_an_algorithm() -> None:
    """Adding an algorithm touches only its own modules: nothing else may branch on, or even mention, a name."""
    offenders = []
    for name in REGISTRY:
        own = {REPO / "shared" / "algorithms" / f"{name}.py", REPO / "shared" / "algorithms" / "__init__.py"}
        if name in ENCODER_KINDS:
            own |= ENCODER_MODULES
        own.add(module_file(REGISTRY[name].learner))
        pattern = re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE)
        offenders += [f"{path.relative_to(REPO)}: {name}" for path in _python_files()
                      if path not in own and pattern.search(path.read_text())]
    assert offenders == []


def test_a_run_config_names_its_algorithm_in_one_section() -> None:
    assert set(RunConfig.model_fields) & set(REGISTRY) == set()  # no per-algorithm sections left


# Modules that may decide by a sampler's name: the table of facts and the registry of classes built on it.
SAMPLER_REGISTRY = {REPO / "shared" / "config" / "samplers.py",
                    *(REPO / "coordinator" / "replay" / "samplers").glob("*.py")}


def _name_comparisons(source: str, known: Collection[str] = tuple(SAMPLERS)) -> list[tuple[int, str]]:
    """(line, name) of every name in `known` (sampler names unless told) used as an operand of a comparison (`==`,
    `!=`, `in`, `not in`, also inside a tuple, list or set operand) or as a `case` pattern."""
    found = []

    def names(node: ast.expr) -> list[str]:
        elements = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return [e.value for e in elements if isinstance(e, ast.Constant) and e.value in known]

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [(node.lineno, name) for operand in (node.left, *node.comparators) for name in names(operand)]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, name) for name in names(node.value)]
    return found


def test_no_module_outside_the_samplers_registry_compares_a_sampler_name() -> None:
    """Adding a sampler touches only its class and the two registries: everyone else asks `replay.traits`."""
    offenders = [f"{path.relative_to(REPO)}:{line} {name}" for path in _python_files() if path not in SAMPLER_REGISTRY
                 for line, name in _name_comparisons(path.read_text())]
    assert offenders == []


@pytest.mark.parametrize("source", ['sampler == "fifo"', 'kind != "prioritized"', 'x in ("fifo", "lifo")',
                                    '"uniform" not in {a, b}', 'match s:\n    case "lifo":\n        pass'])
def test_the_sampler_name_check_finds_each_form_of_comparison(source: str) -> None:
    assert len(_name_comparisons(source)) >= 1


def test_the_sampler_name_check_leaves_other_uses_of_the_names_alone() -> None:
    assert _name_comparisons('SAMPLERS = {"fifo": 1}\nf(sampler="uniform")\nrng.uniform(0, 1) == 3') == []


# ----- loop kinds ----------------------------------------------------------------------------------------------
# Wire modules every run uses; each other one belongs to exactly one loop kind, which declares it.
CORE_WIRE = {"base", "battles", "chunks", "common", "control_plane", "evaluations", "status", "tasks"}


def _own_modules(kind: LoopKind) -> set[Path]:
    """The modules a loop kind's entry names (workload, trainer, router, wire) and the registry's own package."""
    named = [kind.workload, kind.trainer, *(p for p in (kind.router, kind.wire) if p is not None)]
    return {*(REPO / "shared" / "loops").glob("*.py"), *(module_file(p) for p in named)}


def test_every_algorithm_names_a_registered_loop_kind_and_every_kind_is_used() -> None:
    assert {spec.loop for spec in REGISTRY.values()} == set(LOOPS)
    assert all(name == kind.name for name, kind in LOOPS.items())


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_each_loop_kinds_parts_resolve(name: str) -> None:
    kind = loop_of(name)
    assert issubclass(resolve(kind.trainer), Trainer)
    workload = resolve(kind.workload)
    assert isinstance(workload, type) and all(n.startswith("rlfleet_") for n, _ in workload.counters)
    if kind.router is not None:
        assert isinstance(resolve(kind.router), APIRouter)
    if kind.wire is not None:
        assert importlib.import_module(kind.wire).__name__.startswith("rlfleet.shared.wire.")


def test_an_unregistered_loop_kind_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="replay, sequences, chunks, population, dataset"):
        loop_of("sequence")


def test_every_wire_model_is_core_or_declared_by_exactly_one_loop_kind() -> None:
    modules = {m.__module__ for m in vars(wire).values() if isinstance(m, type) and issubclass(m, BaseModel)}
    for module in sorted(modules):
        declared = [kind.name for kind in LOOPS.values() if kind.wire == module]
        core = module.removeprefix("rlfleet.shared.wire.") in CORE_WIRE
        assert (core and not declared) or (not core and len(declared) == 1), (module, declared)


def test_no_module_outside_a_loop_kinds_own_compares_its_name() -> None:
    """Adding a loop kind touches only its own modules and one registry line: everyone else asks its entry."""
    offenders = [f"{path.relative_to(REPO)}:{line} {name}" for path in _python_files()
                 for line, name in _name_comparisons(path.read_text(), LOOPS)
                 if path not in _own_modules(LOOPS[name])]
    assert offenders == []


@pytest.mark.parametrize("source", ['spec.loop == "population"', 'loop in ("population", "dataset")',
                                    'match kind:\n    case "replay":\n        pass'])
def test_the_loop_name_check_finds_each_form_of_comparison(source: str) -> None:
    assert len(_name_comparisons(source, LOOPS)) >= 1


def test_every_algorithm_s_schedulable_hyperparameters_and_their_schedules_are_live() -> None:
    """What the learner takes up between updates (it re-reads its task): each algorithm's learning rate, entropy
    coefficient and clip range or ratio where it has them, and their schedules; never a setting it does not have."""
    assert {"algo.learning_rate", "algo.schedules.learning_rate"} <= set(spec_of(DQNParams()).live)
    ppo = set(spec_of(PPOParams()).live)
    assert {f"algo.{f}" for f in ("learning_rate", "entropy_coef", "clip_range")} <= ppo
    assert {f"algo.schedules.{f}" for f in ("learning_rate", "entropy_coef", "clip_range")} <= ppo
    assert "algo.clip_range" not in spec_of(DQNParams()).live and "algo.gamma" not in ppo
