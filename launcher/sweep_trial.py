"""One trial of a sweep: a real `rlfleet up` run of the base config with the trial's `--set` overrides, in its own
data directory and on its own free port, watched through its journal and stopped through the control plane.

A trial's processes must never outlive the sweep that started them: an orphaned run keeps two cores busy for
its whole budget while the resumed sweep starts another in its place. So each trial's `rlfleet up` leads a
process group of its own (the coordinator and workers it starts join it), is asked by the kernel to stop when
the sweep dies, however it dies (Linux's parent-death signal: SIGTERM, on which `rlfleet up` stops its run in
order), and records its group and start time in the study, so that a restarted sweep finds any survivor and ends
it before it re-runs the trial.

Everything read back comes from the run's journal, the coordinator's record of the run, read-only while the run
goes: the validation curve (for the pruner) and, once it ends, its state, held-out tests and env steps.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlfleet.coordinator.journal.database import stored_meta
from rlfleet.launcher.control import ControlError, admin_token, command
from rlfleet.launcher.up import free_port
from rlfleet.shared.storage.layout import RunLayout

PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOP_SECONDS = 60.0  # a trial asked to stop gets this long to stop its services before its group is killed


@dataclass(frozen=True)
class Validation:
    env_steps: int
    mean: float
    policy_version: int


@dataclass(frozen=True)
class Outcome:
    """How a trial's run ended, from its journal."""

    state: str  # solved, budget_exhausted, stopped, failed, ... ("no journal" when the run never started)
    env_steps: int
    wall_seconds: float
    tests: list[dict[str, Any]]  # the journal's held-out tests (HoldoutResult JSON)
    best_version: int | None  # the best validated version (the run's best/ policy)
    config: dict[str, Any]  # the config the run resolved and started with


def _die_with_parent() -> None:
    """In the trial's `rlfleet up`, before it runs: lead a new process group, and have the kernel send SIGTERM
    when the sweep dies (SIGKILL included), so the run stops in order instead of training on as an orphan."""
    os.setsid()
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_ticks(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22), telling it apart from a
    later process that reuses its id; None when there is no such process (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def group_members(pgid: int, since: int) -> list[int]:
    """Live processes of the trial group `pgid` whose leader started at `since` (clock ticks since boot). Linux gives
    no new process an id still used as a group id, so while any of the trial's processes lives, the group is its;
    once all are gone the id may lead a new group: a leader of that id started at another time is someone else's,
    as is any process started before the trial's leader."""
    leader = start_ticks(pgid)
    if leader is not None and leader != since:
        return []
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid and int(fields[19]) >= since:  # a zombie has ended
            members.append(int(entry.name))
    return members


def end_group(pgid: int, since: int, grace: float = STOP_SECONDS) -> int:
    """End what is left of a trial's process group: SIGTERM (an `rlfleet up` stops its run in order), SIGKILL
    after `grace` seconds. Returns how many processes were found."""
    found = group_members(pgid, since)
    if not found:
        return 0
    _signal_all(found, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and group_members(pgid, since):
        time.sleep(0.2)
    _signal_all(group_members(pgid, since), signal.SIGKILL)
    return len(found)


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(pid, signum)


class TrialRun:
    """A trial's `rlfleet up`, started at once."""

    def __init__(self, trial_dir: Path, config: Path, overrides: list[str]) -> None:
        self.trial_dir = trial_dir
        self.data_dir = trial_dir / "data"
        self.log_path = trial_dir / "up.log"
        self.port = free_port()
        trial_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config.resolve()),
                "--data-dir", str(self.data_dir), "--port", str(self.port)]
        for item in overrides:
            argv += ["--set", item]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent)
        self.pgid = self.proc.pid
        self.since = start_ticks(self.proc.pid) or 0
        self.stop_asked: float | None = None

    @property
    def run_dir(self) -> Path | None:
        """The run's directory once `rlfleet up` has created it (one run per trial data directory)."""
        runs = self.data_dir / "runs"
        found = sorted(runs.iterdir()) if runs.is_dir() else []
        return found[0] if found else None

    @property
    def journal(self) -> Path | None:
        run_dir = self.run_dir
        return None if run_dir is None else RunLayout(run_dir.parent.parent, run_dir.name).journal

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def validations(self) -> list[Validation]:
        return [] if self.journal is None else read_validations(self.journal)

    def stop(self, reason: str) -> None:
        """Ask the run to end through the control plane (`rlfleet ctl stop`); a run that cannot be reached yet (or
        any more) gets SIGTERM, on which `rlfleet up` stops it in order. Its group is killed if it lingers."""
        if self.stop_asked is not None:
            return
        try:
            token = admin_token(self.data_dir / "tokens.json")
            command(f"http://127.0.0.1:{self.port}", token, "POST", "stop", {"reason": reason})
        except ControlError:
            self.terminate()
            return
        self.stop_asked = time.monotonic()

    def terminate(self) -> None:
        """SIGTERM to its `rlfleet up`, once: it stops its run in order (and ignores any later one)."""
        if self.proc.poll() is None and self.stop_asked is None:
            self.stop_asked = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)

    def overdue(self) -> bool:
        """Asked to stop more than STOP_SECONDS ago and still running: its group gets killed."""
        return self.stop_asked is not None and time.monotonic() - self.stop_asked > STOP_SECONDS

    def kill(self) -> None:
        _signal_all(group_members(self.pgid, self.since), signal.SIGKILL)
        self.proc.wait()

    def outcome(self) -> Outcome:
        journal = self.journal
        if journal is None:
            return Outcome("no journal", 0, 0.0, [], None, {})
        return read_outcome(journal)

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").replace("\r", "\n")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def read_validations(journal: Path) -> list[Validation]:
    """The run's validations so far (env steps, mean), in the order reported; read-only, so the run goes on."""
    if not journal.exists():
        return []
    db = sqlite3.connect(f"{journal.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT body FROM evaluations ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the coordinator has not created its tables yet
        return []
    finally:
        db.close()
    return [Validation(int(body["env_steps"]), float(body["mean"]), int(body["policy_version"]))
            for body in (json.loads(r[0]) for r in rows)]


def read_outcome(journal: Path) -> Outcome:
    meta = stored_meta(journal, "lifecycle", "data", "judge", "config")
    lifecycle = meta.get("lifecycle") or {}
    validations = read_validations(journal)
    # the judge's best (coordinator/state/judge.py): the first validation of the highest mean
    best = max(validations, key=lambda v: v.mean, default=None)
    return Outcome(state=lifecycle.get("state", "no journal"), env_steps=(meta.get("data") or {}).get("env_steps", 0),
                   wall_seconds=float(lifecycle.get("ended_elapsed") or lifecycle.get("elapsed") or 0.0),
                   tests=(meta.get("judge") or {}).get("tests", []),
                   best_version=None if best is None else best.policy_version,
                   config=meta.get("config") or {})

