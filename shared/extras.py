"""Optional dependencies: a feature that needs one imports it through `require`, whose error names the extra.

rlfleet's core installs what every run needs; a dependency that serves one feature (an object store, board games,
learning-curve plots, Atari, ONNX) is a pip extra, so that a plain `pip install rlfleet` does not drag it into a
user's environment. Where such a feature is used without its extra, the user reads which extra to install, not a
bare ModuleNotFoundError from deep inside a service.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra installs it."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """`module`, imported; MissingExtra naming `extra` if it (or something it needs) is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(extra_message(module, extra, feature, str(exc))) from exc


def extra_message(module: str, extra: str, feature: str, why: str) -> str:
    """The line a MissingExtra says: the feature, the missing module and why, and the extra that installs it."""
    return f"{feature} needs {module.partition('.')[0]} ({why}): install the {extra} extra, pip install " \
           f"'rlfleet[{extra}]'"
