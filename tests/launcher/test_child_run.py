"""A child run's processes never outlive the command that started it (a sweep, a population): its `rlfleet up`
leads its own process group and gets SIGTERM from the kernel when its parent dies, even by SIGKILL; a restarted
sweep ends whatever is left of a recorded group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rlfleet.launcher.child_run import end_group, group_members, start_ticks
from tests.support.repo import REPO
from tests.support.waiting import wait_for

# A stand-in for the sweep: starts a child the way ChildRun does, prints its pid, then waits.
SWEEP = textwrap.dedent("""
    import subprocess, sys, time
    from rlfleet.launcher.child_run import _lead_a_group_and_die_with_parent as lead
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], preexec_fn=lead)
    print(child.pid, flush=True)
    time.sleep(300)
""")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has ended, waiting for its parent to reap it


def test_a_trial_process_gets_sigterm_when_the_sweep_is_killed(tmp_path: Path) -> None:
    sweep = subprocess.Popen([sys.executable, "-c", SWEEP], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert sweep.stdout is not None
    child = int(sweep.stdout.readline())
    try:
        assert os.getpgid(child) == child  # leads its own group: its services join it
        assert alive(child)
        sweep.kill()
        sweep.wait()
        wait_for(lambda: not alive(child), timeout=10)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_restarted_sweep_ends_what_is_left_of_a_trials_group() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                               "'import time; time.sleep(300)']); print('ok', flush=True); time.sleep(300)"],
        start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert leader.stdout is not None and leader.stdout.readline().strip() == "ok"
    since = start_ticks(leader.pid)
    assert since is not None
    members = group_members(leader.pid, since)
    assert len(members) == 2 and leader.pid in members
    started = time.monotonic()
    left = end_group(leader.pid, since, grace=10)
    assert len(left) == 2 and all("time.sleep(300)" in line for line in left)  # said with their command lines
    assert time.monotonic() - started < 10  # SIGTERM was enough
    leader.wait(timeout=5)
    wait_for(lambda: not any(alive(pid) for pid in members), timeout=10)
    assert end_group(leader.pid, since) == []  # nothing left: nothing to do


def test_a_group_id_reused_by_a_later_process_is_left_alone() -> None:
    """A recorded group whose processes are all gone, its id since taken by a new process: that one started at
    another time than the recorded leader, so it is no trial's and is not touched."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        wait_for(lambda: start_ticks(other.pid) is not None)
        later = start_ticks(other.pid)
        assert later is not None
        assert end_group(other.pid, later - 1, grace=1) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
