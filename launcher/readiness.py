"""Light workers wait for the coordinator before loading their heavy modules.

On a small machine every service starts at once: the coordinator, the learner (torch and its optimizers: about
2.5 s of CPU, the longest start) and the collectors and evaluator (numpy, gymnasium, pydantic: half a second
each). Starting them all together shares the cores five ways, and the learner's first policy, which on-policy
collectors wait for, comes a second later than it would. So a collector or evaluator first polls the
coordinator's `/readyz` with the standard library alone (a few milliseconds of CPU), and imports the rest once
the coordinator answers: the coordinator and the learner start on the cores by themselves, and the light
workers are still ready long before the first policy. The wait is bounded: past it the worker starts anyway
and its own registration retries (and fails loudly) as before.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request

WAIT_SECONDS = 15.0
POLL_SECONDS = 0.05


def await_coordinator(limit: float = WAIT_SECONDS) -> bool:
    """Whether the coordinator of RLFLEET_COORDINATOR_URL answered ready within `limit` seconds (True at once
    when no URL is set: the worker's settings decide where it goes, and it retries there)."""
    url = os.environ.get("RLFLEET_COORDINATOR_URL")
    if not url:
        return True
    deadline = time.monotonic() + limit
    while True:
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/readyz", timeout=2.0) as reply:
                if reply.status == 200:
                    return True
        except (OSError, ValueError):  # refused, not ready (503), a malformed URL: the worker will say so
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
