"""Checking, before a run starts (the preflight, shared/config/preflight.py), that `collector.env_backend` can step
the env section, so a backend that cannot (EnvPool not installed, an env EnvPool does not have) is refused at
`rlfleet up` naming the field, not by every collector at its first task.

sync and async step whatever builds, so only envpool is asked about, in a child interpreter
(shared/config/child.py): the coordinator and the launcher never load gymnasium or EnvPool. Answers are
remembered per process.

Run as `python -m rlfleet.shared.config.backendcheck` it is that child: {"env": the env section, "backend": the backend}
as JSON on stdin, the problem (a message, or null) as the last line of stdout.
"""

from __future__ import annotations

import json
import sys

from rlfleet.shared.config.child import ChildCheckError, answer, ask_child
from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.run_config import EnvBackend

_problems: dict[str, str | None] = {}


def env_backend_problem(env: EnvConfig, backend: EnvBackend) -> str | None:
    """Why `backend` cannot step the env section (naming collector.env_backend), or None when it can."""
    if backend != "envpool":
        return None
    question = json.dumps({"env": env.model_dump(mode="json"), "backend": backend})
    if question not in _problems:
        _problems[question] = _check_in_child(question)
    return _problems[question]


def _check_in_child(question: str) -> str | None:
    try:
        problem = ask_child("rlfleet.shared.config.backendcheck", question)
    except ChildCheckError as exc:
        return f"collector.env_backend: the check that builds the backend {exc}"
    return problem if isinstance(problem, str) else None


def _main() -> None:
    from rlfleet.shared.envs.vector import backend_problem

    question = json.loads(sys.stdin.read())
    answer(backend_problem(EnvConfig.model_validate(question["env"]), question["backend"]))


if __name__ == "__main__":
    _main()
