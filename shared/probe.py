"""Probe an env's spaces in a child process: `python -m shared.probe` reads an EnvConfig on stdin.

The coordinator needs the spaces of the env it plans a run for, but never imports gymnasium or the user's
env code: that would cost it memory and start-up time, and an env that crashes while it is being built
(a missing native library, a segfault in a simulator) must be a clear refusal, not a dead coordinator.
The answer is cached per env config for the life of the process.
"""

from __future__ import annotations

import functools
import subprocess
import sys

from shared.config import EnvConfig
from shared.spaces import Spaces

PROBE_SECONDS = 300.0


class ProbeFailed(ValueError):
    """The env could not be built or has spaces rlfleet cannot train."""


def probe_spaces(env: EnvConfig) -> Spaces:
    return _probe(env.model_dump_json())


@functools.lru_cache(maxsize=64)
def _probe(env_json: str) -> Spaces:
    try:
        done = subprocess.run([sys.executable, "-m", "shared.probe"], input=env_json, capture_output=True,
                              text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired as exc:
        raise ProbeFailed(f"building the env took more than {PROBE_SECONDS:.0f} s") from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise ProbeFailed(lines[-1] if lines else f"the env probe exited with status {done.returncode}")
    return Spaces.model_validate_json(done.stdout.strip().splitlines()[-1])


def main() -> int:
    from shared.envs import make_vector_env
    from shared.gymspaces import describe

    env = EnvConfig.model_validate_json(sys.stdin.read())
    try:
        vec = make_vector_env(env, 1)
        try:
            spaces = describe(vec)
        finally:
            vec.close()
    except Exception as exc:  # report any failure of user code as one line for the parent's message
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(spaces.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
