"""One member of a population (`rlfleet pbt`): a real `rlfleet up` run (a ChildRun: its own data directory, a free
port, a process group of its own that ends with the driver) and the REST calls the population driver makes on it.

Each member's coordinator may load checkpoints from every member's run directory: the driver starts it with
RLFLEET_CHECKPOINT_SOURCES set to the population's members directory, and nothing outside it.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rlfleet.launcher.child_run import ChildRun
from rlfleet.launcher.control import ControlError, command
from rlfleet.shared.checkpoint_signature import CHECKPOINT_NAME


@dataclass
class Member:
    index: int
    root: Path  # the member's directory: its data directory, `rlfleet up`'s log
    seed: int
    settings: dict[str, float]
    run: ChildRun | None = None
    run_dir: Path | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    ready_at: int = 0  # env steps at which the member is next ranked
    status: dict[str, Any] = field(default_factory=dict)  # the latest status read

    @property
    def name(self) -> str:
        return f"member-{self.index}"

    @property
    def url(self) -> str:
        assert self.run is not None
        return self.run.url

    def start(self, config: Path, overrides: list[str], collectors: int, sources: Path) -> ChildRun:
        """`rlfleet up` for this member, its output in up.log."""
        args = ["--collectors", str(collectors), "--seed", str(self.seed)]
        for value in overrides:
            args += ["--set", value]
        self.run = ChildRun(self.root, config, args, env={"RLFLEET_CHECKPOINT_SOURCES": str(sources.resolve())})
        return self.run

    @property
    def exited(self) -> bool:
        return self.run is None or self.run.exit_code() is not None

    def connect(self) -> bool:
        """Whether the member's run directory and tokens are there (they are once its coordinator started)."""
        if self.run is None:
            return False
        self.run_dir = self.run_dir or self.run.run_dir
        self.tokens = self.tokens or self.run.tokens()
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
        """An orderly stop (SIGTERM to `rlfleet up`, which stops its services), then whatever is left killed."""
        if self.run is not None:
            self.run.stop_and_wait()
