"""What a Python file imports, read with ast (nested and relative imports included): for the tests that
enforce the suite's shape and the one import package."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.repo import REPO


def module_name(path: Path) -> str:
    """`tests/coordinator/test_run.py` -> `tests.coordinator.test_run` (a package's __init__ names the package)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, dotted name) of everything `source` (the text of `module`) imports, relative imports resolved.
    `from a.b import c` yields `a.b.c` as well as `a.b`, since `c` may be a module (`from tests import conftest`)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found
