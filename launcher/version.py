"""rlfleet's version: the installed distribution's, or, run from a checkout that was never installed, the one its
pyproject.toml declares (the version the next build of that checkout will have)."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def version() -> str:
    try:
        return installed_version("rlfleet")
    except PackageNotFoundError:
        pass
    try:
        declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown (not installed, and no pyproject.toml beside it)"
    return f"{declared} (checkout at {PYPROJECT.parent}, not installed)"
