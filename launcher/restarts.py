"""When `rlfleet up` restarts a crashed service, and when it gives up: a pure policy, tested without sleeping.

Like Docker's `restart: on-failure` (and systemd's restart limits): restart for as long as the run lasts, after
a delay that doubles with each crash in a row (1, 2, 4, ... s, capped), and start again from the shortest delay
once a process has stayed up `stable_seconds`. A service that is killed now and then (chaos testing, an OOM
kill) is restarted however often it happens; only a crash loop, `max_quick_crashes` crashes in a row each
within `stable_seconds` of starting, means it cannot start at all, and fails the run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    first_delay: float = 1.0
    max_delay: float = 30.0
    # Docker's rule: a container that ran 10 s counts as started. Long enough for any service to import,
    # register and begin work; short enough that kills a dozen seconds apart never add up to a crash loop.
    stable_seconds: float = 10.0
    max_quick_crashes: int = 5

    def __post_init__(self) -> None:
        if self.max_quick_crashes < 1 or self.first_delay < 0 or self.max_delay < self.first_delay:
            raise ValueError(f"invalid restart policy {self}: need max_quick_crashes >= 1 and "
                             f"0 <= first_delay <= max_delay")

    def delay(self, streak: int) -> float:
        """Seconds before the restart that follows the `streak`-th crash in a row (1-based)."""
        return min(self.max_delay, self.first_delay * 2.0 ** (streak - 1))


@dataclass
class CrashRecord:
    """One process slot's crashes under a policy: how many restarts in all, and how many crashes in a row."""

    policy: RestartPolicy
    restarts: int = 0
    streak: int = 0

    def crashed(self, uptime: float) -> float | None:
        """Record a crash after `uptime` seconds of running: the delay before restarting, or None to give up."""
        self.streak = 1 if uptime >= self.policy.stable_seconds else self.streak + 1
        if self.streak >= self.policy.max_quick_crashes:
            return None
        return self.policy.delay(self.streak)

    def restarted(self) -> int:
        """Count a restart; returns the total, which the new process is told (RLFLEET_RESTARTS)."""
        self.restarts += 1
        return self.restarts
