"""One coordinator per journal: a second one refuses to start while the first lives, and a first one killed with
SIGKILL leaves nothing that keeps the next one out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.journal.lock import JournalInUse, JournalLock
from rlfleet.coordinator.main import create_app
from tests.support.api import make_settings, running_client
from tests.support.repo import REPO

HOLD = """
import sys, time
from pathlib import Path
from rlfleet.coordinator.journal.lock import JournalLock
lock = JournalLock.acquire(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_coordinator_on_the_same_journal_refuses_to_start(tmp_path: Path) -> None:
    settings, _ = make_settings(tmp_path)
    with running_client(settings) as first:
        second = TestClient(create_app(settings))
        with pytest.raises(RuntimeError, match=r"in use by another coordinator \(pid \d+ on .*Stop that coordinator"):
            second.__enter__()
        assert first.get("/healthz").status_code == 200  # the first one serves on, undisturbed
    with running_client(settings) as again:  # a stopped coordinator released it
        assert again.get("/healthz").status_code == 200


def test_a_journal_elsewhere_is_locked_where_it_is(tmp_path: Path) -> None:
    settings, _ = make_settings(tmp_path, db_path=tmp_path / "elsewhere" / "journal.sqlite")
    with running_client(settings):
        assert (tmp_path / "elsewhere" / "journal.sqlite.lock").exists()
        with pytest.raises(JournalInUse, match="elsewhere/journal.sqlite"):
            JournalLock.acquire(tmp_path / "elsewhere" / "journal.sqlite")


def test_a_holder_killed_with_sigkill_leaves_no_lock_behind(tmp_path: Path) -> None:
    journal = tmp_path / "coordinator.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(journal)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(JournalInUse, match=f"pid {holder.pid} "):
            JournalLock.acquire(journal)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    assert JournalLock.lock_path(journal).exists()  # the file stays behind, unlocked
    lock = JournalLock.acquire(journal)
    assert JournalLock.lock_path(journal).read_text().startswith(f"pid {os.getpid()} on ")
    lock.release()
    JournalLock.acquire(journal).release()  # released: free again
