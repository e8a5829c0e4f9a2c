"""Building the env section once before a run starts (the preflight, shared/config/preflight.py), so a bad one
is refused before any service starts, and reading the spaces of what was built, which the coordinator plans the
run with (shared/config/plan.py).

A process that already runs environments (collectors, the evaluator, the learner, tests) builds it in-process.
One that has not loaded gymnasium (the coordinator, the launcher) builds it in a child interpreter instead:
those processes stay free of gymnasium and of whatever the user's env module imports (torch, say), at the cost
of one child (about a second) per distinct env section. Verdicts are remembered per process, so a section is
built once however often it is asked about (the preflight, then the run plan, `rlfleet test`, `rlfleet record`).
The verdict also carries the reward_threshold of the env's gymnasium registration: the default of
env.solve_threshold (shared/config/threshold.py).

Run as `python -m rlfleet.shared.config.envcheck` it is that child: the env section as JSON on stdin, the verdict as the
last line of stdout (JSON: the build problem, and the spaces or why rlfleet cannot train them).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rlfleet.shared.config.child import ChildCheckError, answer, ask_child

if TYPE_CHECKING:
    from rlfleet.shared.config.env import EnvConfig
    from rlfleet.shared.payloads.spaces import Spaces

Verdict = dict[str, Any]  # {"problem": str | None, "spaces": dict | None, "spaces_problem": str | None,
#                             "reward_threshold": float | None}
_verdicts: dict[str, Verdict] = {}


class EnvSectionError(ValueError):
    """A part of the env section that cannot be built; the message starts with the field at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"env.{field}: {problem}")


def _verdict(env: EnvConfig) -> Verdict:
    key = env.model_dump_json(exclude={"solve_threshold"})
    if key not in _verdicts:
        _verdicts[key] = _build_here(env) if "gymnasium" in sys.modules else _build_in_child(key)
    return _verdicts[key]


def build_problem(env: EnvConfig) -> str | None:
    """Why `env` cannot be built (its message names the field), or None when it builds."""
    problem: str | None = _verdict(env)["problem"]
    return problem


def spaces_of(env: EnvConfig) -> Spaces:
    """The spaces of the env the section builds; ValueError naming env.id if rlfleet cannot train them."""
    from rlfleet.shared.payloads.spaces import Spaces

    verdict = _verdict(env)
    if verdict["problem"] is not None:
        raise ValueError(verdict["problem"])
    if verdict["spaces"] is None:
        raise EnvSectionError("id", f"{env.id}: {verdict['spaces_problem']}")
    return Spaces.model_validate(verdict["spaces"])


def registered_threshold(env: EnvConfig) -> float | None:
    """The reward_threshold of the env's gymnasium registration (None: it registers none, or it is the user's own
    entry point); ValueError naming the field when the section does not build."""
    verdict = _verdict(env)
    if verdict["problem"] is not None:
        raise ValueError(verdict["problem"])
    threshold = verdict.get("reward_threshold")
    return None if threshold is None else float(threshold)


def _build_here(env: EnvConfig) -> Verdict:
    from rlfleet.shared.envs.build import make_env  # gymnasium: only in processes that already loaded it
    from rlfleet.shared.envs.gymspaces import describe

    try:
        made = make_env(env)
    except EnvSectionError as exc:
        return {"problem": str(exc), "spaces": None, "spaces_problem": None}
    spec = made.spec
    registered = None if spec is None or spec.reward_threshold is None else float(spec.reward_threshold)
    try:
        return {"problem": None, "spaces": describe(made).model_dump(mode="json"), "spaces_problem": None,
                "reward_threshold": registered}
    except ValueError as exc:
        return {"problem": None, "spaces": None, "spaces_problem": str(exc), "reward_threshold": registered}
    finally:
        made.close()


def _build_in_child(key: str) -> Verdict:
    try:
        verdict = ask_child("rlfleet.shared.config.envcheck", key)
    except ChildCheckError as exc:
        return _failed(f"env: the check that builds the env {exc}")
    return verdict if isinstance(verdict, dict) else _failed(f"env: the check answered {verdict!r}")


def _failed(problem: str) -> Verdict:
    return {"problem": problem, "spaces": None, "spaces_problem": None}


def _main() -> None:
    import gymnasium  # noqa: F401  loaded first, so the verdict below builds the env in this process
    from pydantic import ValidationError

    # Run as __main__, this file is a second copy of shared.config.envcheck: the verdict comes from the module
    # itself, whose EnvSectionError is the class make_env raises.
    from rlfleet.shared.config import envcheck
    from rlfleet.shared.config.env import EnvConfig

    try:
        env = EnvConfig.model_validate_json(sys.stdin.read())
    except ValidationError as exc:
        verdict = _failed("; ".join(str(e.get("ctx", {}).get("error", e["msg"])) for e in exc.errors()))
    else:
        verdict = envcheck._verdict(env)
    answer(verdict)


if __name__ == "__main__":
    _main()
