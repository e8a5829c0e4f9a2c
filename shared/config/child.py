"""Asking a child interpreter about code the asking process must not import: a user's env or hook module may
pull in torch or gymnasium (which the coordinator never loads), fail, print, or hang at import.

The question goes to `python -m <module>` as text on stdin; the answer comes back as JSON on the last line of
its stdout, so whatever the imported code printed before it does not matter. The child imports what the asking
process could import: it gets the parent's sys.path as PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

CHILD_TIMEOUT_SECONDS = 120.0


class ChildCheckError(RuntimeError):
    """The child gave no answer; the message says why ("took over 120 s", "failed: <its stderr>")."""


def ask_child(module: str, question: str, timeout: float = CHILD_TIMEOUT_SECONDS) -> Any:
    """The JSON answer of `python -m module` to `question`; ChildCheckError when it timed out or failed."""
    # RLFLEET_FIELD_DOCS=0: a check renders no schema (shared/__init__.py)
    child_env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "RLFLEET_FIELD_DOCS": "0"}
    try:
        done = subprocess.run([sys.executable, "-m", module], input=question, env=child_env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ChildCheckError(f"took over {timeout:g} s") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise ChildCheckError(f"failed: {done.stderr.strip()[-500:]}")
    return json.loads(lines[-1])


def answer(value: Any) -> None:
    """The child's side: print `value` as JSON on a line of its own, after whatever was printed before."""
    print("\n" + json.dumps(value))
