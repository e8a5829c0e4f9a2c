"""Checking, before a run starts (the preflight, shared/config/preflight.py), that every learner hook's function
loads, so a typo in a hook is refused at `rlfleet up` naming the field instead of ending the learner later.

The check runs in a child interpreter (shared/config/child.py): the coordinator and the launcher never import a
user's hook module, which may import torch (the coordinator never loads it: tests/coordinator/test_imports.py),
anything else, or fail at import. `importlib.util.find_spec` in-process would not do: for 'pkg.mod' it runs
pkg/__init__.py, and it cannot tell whether the function exists. One child per distinct list of hooks (a
fraction of a second plus the hook modules' own imports); answers are remembered per process. The learner loads
its hooks again when it starts (learner_worker/hooks.py), in its own environment.

Run as `python -m rlfleet.shared.config.hookcheck` it is that child: the calls as a JSON list on stdin, one problem (a
message, or null) per hook as the last line of stdout.
"""

from __future__ import annotations

import json
import sys

from rlfleet.shared.config.child import ChildCheckError, answer, ask_child
from rlfleet.shared.config.hooks import HookLoadError, load_hook

_problems: dict[tuple[str, ...], str | None] = {}


def hooks_problem(calls: tuple[str, ...]) -> str | None:
    """Why the hooks calling `calls` (in config order) do not all load, naming each field; None if they do."""
    if not calls:
        return None
    if calls not in _problems:
        _problems[calls] = _check_in_child(calls)
    return _problems[calls]


def _check_in_child(calls: tuple[str, ...]) -> str | None:
    try:
        problems = ask_child("rlfleet.shared.config.hookcheck", json.dumps(calls))
    except ChildCheckError as exc:
        return f"learner.hooks: the check that imports the hooks {exc}"
    return "; ".join(p for p in problems if p) or None


def _problem(index: int, call: str) -> str | None:
    try:
        load_hook(index, call)
    except HookLoadError as exc:
        return str(exc)
    return None


def _main() -> None:
    answer([_problem(index, call) for index, call in enumerate(json.loads(sys.stdin.read()))])


if __name__ == "__main__":
    _main()
