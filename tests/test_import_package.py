"""One import package: every service is imported as rlfleet.<service>, never by its bare folder name.

The repository keeps a top-level folder per service, and rlfleet/ links each one into the import package. A module
that imported `shared.x` while the rest import `rlfleet.shared.x` would load a second copy of it (its own classes,
its own module state) from a checkout and fail outright from an installed wheel, which holds no `shared` package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import imported_modules, module_name
from tests.support.repo import REPO

SERVICES = ("shared", "coordinator", "collector_worker", "learner_worker", "evaluator", "launcher")
CODE = (*SERVICES, "tests", "bench", "docs", "examples", "rlfleet")


def python_files() -> list[Path]:
    return sorted(p for top in CODE if (REPO / top).is_dir() and not (REPO / top).is_symlink()
                  for p in (REPO / top).rglob("*.py") if not any(part.is_symlink() for part in p.parents))


def test_no_module_imports_a_service_by_its_bare_folder_name() -> None:
    bare = [f"{path.relative_to(REPO)}:{line}: {name}" for path in python_files()
            for line, name in imported_modules(path.read_text(), module_name(path), path.name == "__init__.py")
            if name.split(".")[0] in SERVICES]
    assert bare == []


@pytest.mark.parametrize("service", SERVICES)
def test_the_import_package_links_each_service_folder(service: str) -> None:
    link = REPO / "rlfleet" / service
    assert link.is_symlink() and link.resolve() == (REPO / service).resolve()
