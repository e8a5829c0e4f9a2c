"""A whole run started by another `rlfleet` command: one `rlfleet up` subprocess (a sweep's trial, a population's
member) in a data directory of its own, on a free port, in a process group of its own.

Such a run must never outlive the command that started it: an orphaned run keeps two cores busy for its whole
budget while a resumed sweep starts another in its place. So its `rlfleet up` leads a process group of its own
(the coordinator and workers it starts join it), and the kernel asks it to stop when its parent dies, however it
dies (Linux's parent-death signal: SIGTERM, on which `rlfleet up` stops its run in order). Its group id and its
leader's start time name the group for good: a restarted sweep finds any survivor by them and ends it, and a
process that later reuses the id is left alone.

A stop is asked for through the control plane (`rlfleet ctl stop`, so the run ends `stopped` with its reason), by
SIGTERM where the coordinator does not answer, and the group is killed once the stop is overdue.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlfleet.launcher.control import ControlError, admin_token, command
from rlfleet.launcher.up import free_port
from rlfleet.shared.tokens import load_tokens_file

PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOP_SECONDS = 60.0  # an orderly stop (its services checkpoint and report) before the group is killed


def _lead_a_group_and_die_with_parent() -> None:
    """In the child `rlfleet up`, before it runs: lead a new process group, and have the kernel send SIGTERM
    when the parent dies (SIGKILL included), so the run stops in order instead of training on as an orphan."""
    os.setsid()
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stat(pid: int | str) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (after the command name, which may hold spaces); None if there is no such
    process (or no /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22), telling it apart from a
    later process that reuses its id; None when there is no such process (or no /proc)."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def group_members(pgid: int, since: int) -> list[int]:
    """Live processes of the run's group `pgid` whose leader started at `since` (clock ticks since boot). Linux gives
    no new process an id still used as a group id, so while any of the run's processes lives, the group is its;
    once all are gone the id may lead a new group: a leader of that id started at another time is someone else's,
    as is any process started before the run's leader."""
    leader = start_ticks(pgid)
    if leader is not None and leader != since:
        return []
    members = []
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid and int(fields[19]) >= since:
            members.append(int(entry.name))  # (a zombie, state Z, has ended)
    return members


def end_group(pgid: int, since: int, grace: float = STOP_SECONDS) -> list[str]:
    """End what is left of a run's process group: SIGTERM (an `rlfleet up` stops its run in order), SIGKILL
    after `grace` seconds. Returns the command lines of the processes found, so a caller can say what was left."""
    found = group_members(pgid, since)
    if not found:
        return []
    described = [_command_line(pid) for pid in found]
    _signal_all(found, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and group_members(pgid, since):
        time.sleep(0.2)
    _signal_all(group_members(pgid, since), signal.SIGKILL)
    return described


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    return f"pid {pid}: " + (raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?")


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(pid, signum)


class ChildRun:
    """One `rlfleet up` of `config` with `args` (`--set` overrides, `--seed`, ...), started at once."""

    def __init__(self, root: Path, config: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.root = root  # the run's own directory: its data directory and `rlfleet up`'s log
        self.data_dir = root / "data"
        self.log_path = root / "up.log"
        self.port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config.resolve()),
                "--data-dir", str(self.data_dir), "--port", str(self.port), *args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=None if env is None else {**os.environ, **env},
                                         preexec_fn=_lead_a_group_and_die_with_parent)
        self.pgid = self.proc.pid
        self.since = start_ticks(self.proc.pid) or 0
        self.stop_asked: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def run_dir(self) -> Path | None:
        """The run's directory once its coordinator has written the run's config (one run per data directory)."""
        found = sorted((self.data_dir / "runs").glob("*/config.yaml"))
        return found[-1].parent if found else None

    def tokens(self) -> dict[str, str]:
        """The run's tokens once its coordinator has written them ({} before)."""
        with contextlib.suppress(ValueError):
            return load_tokens_file(self.data_dir / "tokens.json")
        return {}

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def stop(self, reason: str) -> None:
        """Ask the run to end through the control plane; a run that cannot be reached yet (or any more) gets
        SIGTERM, on which `rlfleet up` stops it in order. `overdue` says when its group should be killed."""
        if self.stop_asked is not None:
            return
        try:
            command(self.url, admin_token(self.data_dir / "tokens.json"), "POST", "stop", {"reason": reason})
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

    def stop_and_wait(self) -> None:
        """SIGTERM, up to STOP_SECONDS for the orderly stop, then whatever is left of the group killed."""
        self.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=STOP_SECONDS)
        self.kill()

    def leftovers(self, grace: float = 5.0) -> list[str]:
        """After `rlfleet up` exited: end any process of its group still running (none should be) and describe
        them."""
        return end_group(self.pgid, self.since, grace)

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").replace("\r", "\n")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())
