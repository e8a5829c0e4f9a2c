"""One member of a population (`rlfleet pbt`): a real `rlfleet up` run in a process group of its own, with its own
data directory and a free port, and the REST calls the population driver makes on it.

Each member's coordinator may load checkpoints from every member's run directory: the driver starts it with
RLFLEET_CHECKPOINT_SOURCES set to the population's members directory, and nothing outside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rlfleet.launcher.control import ControlError, command
from rlfleet.launcher.up import free_port
from rlfleet.shared.checkpoint_signature import CHECKPOINT_NAME
from rlfleet.shared.tokens import load_tokens_file

STOP_SECONDS = 60.0  # an orderly stop of `rlfleet up` (its services checkpoint) before the group is killed


@dataclass
class Member:
    index: int
    root: Path  # the member's directory: its data directory, `rlfleet up`'s log
    seed: int
    settings: dict[str, float]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    run_dir: Path | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    ready_at: int = 0  # env steps at which the member is next ranked
    status: dict[str, Any] = field(default_factory=dict)  # the latest status read

    @property
    def name(self) -> str:
        return f"member-{self.index}"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, config: Path, overrides: list[str], collectors: int, sources: Path) -> None:
        """`rlfleet up` for this member, in a new session (its own process group), its output in up.log."""
        self.root.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config), "--data-dir",
                str(self.data_dir), "--port", str(self.port), "--collectors", str(collectors), "--seed",
                str(self.seed)]
        for value in overrides:
            args += ["--set", value]
        env = {**os.environ, "RLFLEET_CHECKPOINT_SOURCES": str(sources.resolve())}
        with open(self.root / "up.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    @property
    def exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def connect(self) -> bool:
        """Whether the member's run directory and tokens are there (they are once its coordinator started)."""
        if self.run_dir is None:
            runs = sorted((self.data_dir / "runs").glob("*/config.yaml"))
            if runs:
                self.run_dir = runs[-1].parent
        if not self.tokens:
            with contextlib.suppress(ValueError):
                self.tokens = load_tokens_file(self.data_dir / "tokens.json")
        return self.run_dir is not None and bool(self.tokens)

    def read_status(self) -> dict[str, Any] | None:
        """The member's status, or None while its coordinator does not answer."""
        if not self.connect():
            return None
        try:
            resp = httpx.get(f"{self.url}/v1/status", timeout=5,
                             headers={"Authorization": f"Bearer {self.tokens['read']}"})
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        self.status = resp.json()
        return self.status

    @property
    def running(self) -> bool:
        return not self.exited and self.status.get("run_state", "running") == "running"

    def score(self, kind: str) -> float | None:
        """What ranks the member: its recent training return, or its latest validation mean."""
        if kind == "validation":
            latest = self.status.get("latest_evaluation")
            return None if latest is None else float(latest["mean"])
        value = self.status.get("recent_return_mean")
        return None if value is None else float(value)

    def control(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A control-plane call; ControlError (naming the member) when it is refused."""
        try:
            return command(self.url, self.tokens["admin"], method, path, body)
        except ControlError as exc:
            raise ControlError(f"{self.name}: {path}: {exc}") from exc

    def latest_checkpoint(self) -> int:
        """The newest signed checkpoint's iteration in the member's run directory (-1: none)."""
        if self.run_dir is None:
            return -1
        names = [p.name.removesuffix(".json") + ".pt" for p in (self.run_dir / "checkpoints").glob("learner-*.json")]
        found = [int(m.group(1)) for n in names if (m := CHECKPOINT_NAME.match(n))]
        return max(found, default=-1)

    def fresh_checkpoint(self, timeout: float) -> str | None:
        """Ask the running member for a checkpoint and wait for it (an ended member's latest stands): the
        checkpoint's file name, or None if it has none."""
        before = self.latest_checkpoint()
        if self.running:
            with contextlib.suppress(ControlError):
                self.control("POST", "checkpoint")
                deadline = time.monotonic() + timeout
                while self.latest_checkpoint() <= before and time.monotonic() < deadline and not self.exited:
                    time.sleep(0.2)
        latest = self.latest_checkpoint()
        return None if latest < 0 else f"learner-{latest:010d}.pt"

    def load_checkpoint(self, source: Member, checkpoint: str) -> dict[str, Any]:
        assert source.run_dir is not None
        return self.control("POST", "load-checkpoint", {"request_id": uuid.uuid4().hex,
                                                        "source": str(source.run_dir), "checkpoint": checkpoint})

    def stop(self) -> None:
        """An orderly stop (SIGTERM to `rlfleet up`, which stops its services), then the whole group killed."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_SECONDS)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # services `rlfleet up` left behind, and up itself if it hung
        proc.wait()
