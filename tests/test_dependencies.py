"""pyproject.toml's ranges and requirements.lock's pins agree: every dependency of the core and of every extra has
a pin in the lock, inside its range, so set-up, CI and the image install a set that `pip install rlfleet` allows."""

from __future__ import annotations

import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.repo import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
GROUPS = {"core": PROJECT["dependencies"], **PROJECT["optional-dependencies"]}


def _lock() -> dict[str, Version]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        line = line.partition("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = Version(version)
    return pins


LOCK = _lock()


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_dependency_is_a_range_with_a_pin_in_the_lock_inside_it(group: str) -> None:
    for line in GROUPS[group]:
        requirement = Requirement(line)
        assert not any(s.operator in ("==", "===") for s in requirement.specifier), \
            f"{group}: {line} is an exact pin; pyproject.toml gives ranges, requirements.lock the versions"
        pinned = LOCK.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{group}: {requirement.name} has no pin in requirements.lock"
        assert requirement.specifier.contains(pinned, prereleases=True), \
            f"{group}: requirements.lock pins {requirement.name}=={pinned}, outside {requirement.specifier}"


def test_the_core_leaves_single_feature_dependencies_to_extras() -> None:
    core = {canonicalize_name(Requirement(line).name) for line in PROJECT["dependencies"]}
    assert core.isdisjoint({"boto3", "pettingzoo", "pygame", "matplotlib", "onnx", "onnxruntime"})
    uvloop = next(Requirement(line) for line in PROJECT["dependencies"] if line.startswith("uvloop"))
    assert uvloop.marker is not None and not uvloop.marker.evaluate({"sys_platform": "win32"})


def _required_by_rlfleet() -> set[str]:
    """Every distribution the core and all extras pull in, transitively, as the installed metadata declares it."""
    todo = [(Requirement(line), "") for lines in GROUPS.values() for line in lines]
    found: set[str] = set()
    seen: set[tuple[str, str]] = set()
    while todo:
        requirement, extra = todo.pop()
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        found.add(name)
        for wanted in ("", *requirement.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            try:
                requires = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                pytest.skip(f"{name} is not installed: run scripts/env.sh, which installs every extra")
            todo += [(Requirement(line), wanted) for line in requires]
    return found


def test_the_lock_pins_nothing_that_no_dependency_requires() -> None:
    """A pin nothing requires is a package that was in the venv the lock was frozen from (a profiler, a notebook):
    constraints never install it, so the lock would claim a tested version of something the tests never had."""
    assert sorted(LOCK.keys() - _required_by_rlfleet()) == [], \
        "requirements.lock pins what neither the core nor any extra requires: drop those lines"
