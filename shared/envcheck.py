"""Building the env section once while it is validated, so a bad one is refused when the config loads.

A process that already runs environments (collectors, the evaluator, the learner, tests) builds it in-process.
One that has not loaded gymnasium (the coordinator, the launcher) builds it in a child interpreter instead:
those processes stay free of gymnasium and of whatever the user's env module imports (torch, say), at the cost
of one child (about a second) per distinct env section. Verdicts are remembered per process, so a section is
built once however often it is validated (every claimed task carries it).

Run as `python -m shared.envcheck` it is that child: the env section as JSON on stdin, the verdict as the last
line of stdout (JSON: the problem, or null).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.envconfig import EnvConfig

CHILD_TIMEOUT_SECONDS = 120.0
_verdicts: dict[str, str | None] = {}


class EnvSectionError(ValueError):
    """A part of the env section that cannot be built; the message starts with the field at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"env.{field}: {problem}")


def build_problem(env: EnvConfig) -> str | None:
    """Why `env` cannot be built (its message names the field), or None when it builds."""
    key = env.model_dump_json(exclude={"solve_threshold"})
    if key not in _verdicts:
        _verdicts[key] = _build_here(env) if "gymnasium" in sys.modules else _build_in_child(key)
    return _verdicts[key]


def _build_here(env: EnvConfig) -> str | None:
    from shared.envs import make_env  # gymnasium: only in processes that already loaded it

    try:
        make_env(env).close()
    except EnvSectionError as exc:
        return str(exc)
    return None


def _build_in_child(key: str) -> str | None:
    child_env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # import what we can
    try:
        done = subprocess.run([sys.executable, "-m", "shared.envcheck"], input=key, env=child_env,
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return f"env: building the env took over {CHILD_TIMEOUT_SECONDS:g} s when the config was checked"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return f"env: the check that builds the env failed: {done.stderr.strip()[-500:]}"
    verdict = json.loads(lines[-1])  # the env's own prints may come before it
    return verdict if isinstance(verdict, str) else None


def _main() -> None:
    import gymnasium  # noqa: F401  loaded first, so validating below builds the env in this process
    from pydantic import ValidationError

    from shared.envconfig import EnvConfig

    problem = None
    try:
        EnvConfig.model_validate_json(sys.stdin.read())
    except ValidationError as exc:
        problem = "; ".join(str(e.get("ctx", {}).get("error", e["msg"])) for e in exc.errors())
    print("\n" + json.dumps(problem))  # on a line of its own, whatever the env printed before it


if __name__ == "__main__":
    _main()
