"""Real service processes on loopback for integration tests, with logs kept for failure messages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from rlfleet.launcher.up import free_port
from rlfleet.shared.wire import Status


class Fleet:
    """Starts `python -m rlfleet.launcher <service>` processes with RLFLEET_* env, and stops them all at the end."""

    def __init__(self, tmp: Path, data_dir: Path, config_file: Path, tokens: dict[str, str],
                 coordinator_env: dict[str, str] | None = None) -> None:
        self.tmp, self.data_dir, self.tokens = tmp, data_dir, tokens
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.coordinator_env = {
            "RLFLEET_CONFIG": str(config_file), "RLFLEET_DATA_DIR": str(data_dir),
            "RLFLEET_TOKENS_FILE": str(data_dir / "tokens.json"), "RLFLEET_PORT": str(self.port),
            "RLFLEET_TICK_SECONDS": "0.2", **(coordinator_env or {}),
        }
        self.http = httpx.Client(base_url=self.url, timeout=5,
                                 headers={"Authorization": f"Bearer {tokens['admin']}"})

    def start(self, name: str, service: str, env: dict[str, str]) -> subprocess.Popen:
        full = {k: v for k, v in os.environ.items() if not k.startswith("RLFLEET_")}
        full.update(env, PYTHONUNBUFFERED="1", RLFLEET_WORKER_NAME=name)
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child process
        proc = subprocess.Popen([sys.executable, "-m", "rlfleet.launcher", service], env=full, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs[name] = proc
        return proc

    def start_coordinator(self) -> None:
        self.start("coordinator", "coordinator", self.coordinator_env)
        self.wait_for(lambda: self._ready(), 60, "coordinator ready")

    @property
    def worker_env(self) -> dict[str, str]:
        """What every worker is started with: where the coordinator, the data and the tokens are."""
        return {"RLFLEET_COORDINATOR_URL": self.url, "RLFLEET_DATA_DIR": str(self.data_dir),
                "RLFLEET_TOKENS_FILE": str(self.data_dir / "tokens.json"), "RLFLEET_MAX_UNAVAILABLE_SECONDS": "20"}

    def start_worker(self, name: str, service: str) -> subprocess.Popen:
        return self.start(name, service, self.worker_env)

    def _ready(self) -> bool:
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def status(self) -> Status:
        resp = self.http.get("/v1/status")
        resp.raise_for_status()
        return Status.model_validate_json(resp.content)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.tmp.glob("*.log")))

    def wait_for(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            for name, proc in self.procs.items():
                if proc.poll() not in (None, 0):
                    raise AssertionError(f"{name} died with {proc.returncode} while waiting for {what}\n"
                                         f"{self.logs()}")
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.logs()}")

    def kill(self, name: str) -> None:
        """SIGKILL a process and stop watching it (its death is the point, not a failure)."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.http.close()
