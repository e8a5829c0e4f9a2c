"""Child processes of `rlfleet up`: started with their service's environment, logged to files, stopped politely."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rlfleet.launcher.services import Service


@dataclass
class Child:
    name: str
    service: str
    replica: int
    proc: subprocess.Popen
    log_path: Path
    started: float  # time.monotonic() at start: how long it ran decides its restart backoff

    @property
    def exit_code(self) -> int | None:
        return self.proc.poll()

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


# Who a process is and the credentials it presents: `rlfleet up` hands each process its own, so a value left in the
# user's shell (a token for another coordinator, one worker name) must not reach every service.
PER_PROCESS = frozenset({"RLFLEET_TOKEN", "RLFLEET_TOKEN_FILE", "RLFLEET_TOKENS_FILE", "RLFLEET_WORKER_NAME",
                         "RLFLEET_RESTARTS", "RLFLEET_LAST_ERROR"})


def child_environment(service: Service) -> dict[str, str]:
    """The user's environment, then the service's on top of it.

    The user's settings reach every service: RLFLEET_* worker settings the table does not declare (say
    RLFLEET_HTTP_TIMEOUT_SECONDS), OMP_* and MKL_* thread counts, anything else. The service's own values win, as
    they must: those the user may change (`Place.setting`, RLFLEET_TORCH_THREADS among them) already hold the
    user's value (`rlfleet up` reads them from its own environment), and the rest (addresses, paths) are what this
    `rlfleet up` runs with. Identity and credentials (`PER_PROCESS`) never come from the shell."""
    env = {k: v for k, v in os.environ.items() if k not in PER_PROCESS}
    env.update(service.env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start(service: Service, replica: int, logs: Path, cwd: Path, restarts: int = 0,
          last_error: str = "") -> Child:
    name = service.name if service.replicas == 1 else f"{service.name}-{replica + 1}"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    env = child_environment(service)
    env.setdefault("RLFLEET_WORKER_NAME", name)
    env["RLFLEET_RESTARTS"] = str(restarts)  # shown per worker in the coordinator's status
    if last_error:  # why the previous process ended: the worker says so when it registers (shown in status)
        env["RLFLEET_LAST_ERROR"] = last_error[:300]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(service.command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    return Child(name, service.name, replica, proc, log_path, time.monotonic())
