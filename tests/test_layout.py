"""The shape of the test suite: test modules import shared helpers from tests/support and never from one another.

A helper imported from a test module ties the importer to that module's collection, fixtures and name (moving or
renaming one test file broke others), and a helper copied into a second file drifts from the first. So: no module
under tests/ imports a test module (`test_*`), a conftest (fixtures reach tests through pytest, not imports) or a
`helpers` module; and every module under tests/ that is not a test, a conftest or a package marker lives in
tests/support/, where the next person looks for it. Imports are read with ast, nested ones included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import imported_modules, module_name
from tests.support.repo import REPO

TESTS = REPO / "tests"
SUPPORT = TESTS / "support"


def forbidden(name: str) -> str | None:
    """Why importing `name` from a test module is not allowed, or None."""
    parts = name.split(".")
    if parts[0] != "tests":
        return None
    if any(part.startswith("test_") for part in parts):
        return "imports a test module: move what it needs to tests/support/"
    if "conftest" in parts:
        return "imports a conftest: take fixtures as arguments, and plain helpers from tests/support/"
    if "helpers" in parts and parts[:2] != ["tests", "support"]:
        return "imports a helpers module outside tests/support/: move it there, named for what it owns"
    return None


def violations(path: Path) -> list[str]:
    """One line per offending import statement, naming the first forbidden module it reaches."""
    found: dict[int, str] = {}
    for line, name in imported_modules(path.read_text(), module_name(path), path.name == "__init__.py"):
        if line not in found and (why := forbidden(name)) is not None:
            found[line] = f"{path.relative_to(REPO)}:{line}: `{name}` {why}"
    return list(found.values())


def test_no_module_of_the_suite_imports_a_test_module_a_conftest_or_a_stray_helpers_module() -> None:
    found = [v for path in sorted(TESTS.rglob("*.py")) for v in violations(path)]
    assert found == [], "\n".join(found)


def test_modules_that_are_not_tests_live_in_support() -> None:
    allowed = {"__init__.py", "conftest.py"}
    stray = [str(path.relative_to(REPO)) for path in sorted(TESTS.rglob("*.py"))
             if SUPPORT not in path.parents and path.name not in allowed and not path.name.startswith("test_")]
    assert stray == [], f"helper modules outside tests/support/ (move them there): {stray}"


@pytest.mark.parametrize(("source", "module", "caught"), [
    ("from tests.coordinator.test_run import chunk", "tests.coordinator.test_gc", True),
    ("import tests.shared.payloads.test_recordings", "tests.coordinator.test_gc", True),
    ("from tests.coordinator import test_run", "tests.coordinator.test_gc", True),
    ("from .test_run import chunk", "tests.coordinator.test_gc", True),
    ("def f():\n    from tests.deploy.test_kubernetes import one\n", "tests.deploy.test_x", True),
    ("from tests.conftest import REPO", "tests.shared.test_x", True),
    ("from tests import conftest", "tests.shared.test_x", True),
    ("from tests.coordinator.helpers import auth", "tests.coordinator.test_x", True),
    ("from . import helpers", "tests.coordinator.test_x", True),
    ("from tests.support.api import auth", "tests.coordinator.test_x", False),
    ("from tests.support import userenv", "tests.shared.test_x", False),
    ("from coordinator.replay.buffer import ReplayBuffer", "tests.coordinator.replay.test_x", False),
    ("from tests.support.testing_envs import X", "tests.shared.test_x", False),
])
def test_the_rule_catches_every_spelling_of_a_forbidden_import(source: str, module: str, caught: bool) -> None:
    """The checks above are only as good as this reader: absolute, relative, `from package import module`
    and nested imports all count, and support modules (whatever their names) do not."""
    names = [name for _, name in imported_modules(source, module)]
    assert any(forbidden(name) for name in names) == caught, names
