"""Where the repository is, for tests that read its committed files or start its commands in it."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def module_file(path: str) -> Path:
    """The repository file of a module named `rlfleet.<service>.<module>` (or `module:attribute`): each service's
    top-level folder is what the import package rlfleet/ links to."""
    module = path.partition(":")[0].removeprefix("rlfleet.")
    return REPO / (module.replace(".", "/") + ".py")
