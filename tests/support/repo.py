"""Where the repository is, for tests that read its committed files or start its commands in it."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def module_file(path: str) -> Path:
    """The repository file of a module named `rlfleet.<service>.<module>` (or `module:attribute`): each service's
    top-level folder is what the import package rlfleet/ links to."""
    module = path.partition(":")[0].removeprefix("rlfleet.")
    return REPO / (module.replace(".", "/") + ".py")


def run_bench(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python bench/<script> ARGS` from the repository root, with the repository importable (bench scripts import
    each other as `bench.<name>`), its output captured as text."""
    return subprocess.run([sys.executable, str(REPO / "bench" / script), *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=timeout)
