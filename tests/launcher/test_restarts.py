"""Supervision in `rlfleet up`: the restart policy (backoff, reset after a stable run, giving up on a crash
loop) as a pure class, and Up._supervise driven by a fake clock and fake processes: no sleeping, no children."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import rlfleet.launcher.up as up_module
from rlfleet.launcher.processes import Child
from rlfleet.launcher.restarts import CrashRecord, RestartPolicy
from rlfleet.launcher.services import Service
from rlfleet.launcher.up import ServiceFailed, Up, UpOptions
from tests.support.repo import REPO

QUICK = 0.5  # seconds of uptime: well under any stable_seconds used here


def test_backoff_doubles_from_one_second_and_is_capped() -> None:
    record = CrashRecord(RestartPolicy(max_quick_crashes=100))
    assert [record.crashed(QUICK) for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert record.streak == 8


def test_a_stable_run_resets_the_backoff() -> None:
    record = CrashRecord(RestartPolicy(stable_seconds=10))
    assert [record.crashed(QUICK) for _ in range(3)] == [1, 2, 4]
    assert record.crashed(10.0) == 1  # up for stable_seconds: this crash starts a new streak
    assert record.crashed(9.99) == 2


def test_gives_up_on_the_kth_quick_crash_in_a_row() -> None:
    record = CrashRecord(RestartPolicy(max_quick_crashes=5))
    assert [record.crashed(QUICK) for _ in range(4)] == [1, 2, 4, 8]
    assert record.crashed(QUICK) is None


def test_never_gives_up_while_crashes_are_spread_out() -> None:
    """The chaos run that used to fail: a service killed every 12 s, for as long as the run lasts."""
    record = CrashRecord(RestartPolicy())
    for _ in range(1000):
        delay = record.crashed(12.0 - 1.0)  # killed 12 s after the last kill, restarted 1 s after it
        assert delay == 1
        record.restarted()
    assert record.restarts == 1000


def test_one_allowed_crash_gives_up_at_once() -> None:
    assert CrashRecord(RestartPolicy(max_quick_crashes=1)).crashed(QUICK) is None


@pytest.mark.parametrize("kwargs", [{"max_quick_crashes": 0}, {"first_delay": -1}, {"max_delay": 0.5}])
def test_invalid_policies_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="invalid restart policy"):
        RestartPolicy(**kwargs)


# ----- Up._supervise with a fake clock --------------------------------------------------------------------------


@dataclass
class FakeProc:
    code: int | None = None

    def poll(self) -> int | None:
        return self.code


class Harness:
    """An Up with one evaluator 'process' whose starts are recorded and whose clock is ours."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: object) -> None:
        self.now = 1000.0
        self.starts: list[int] = []  # RLFLEET_RESTARTS of every (re)start
        self.reasons: list[str] = []  # RLFLEET_LAST_ERROR of every (re)start
        self.up = Up(UpOptions(config=REPO / "configs/cartpole_dqn.yaml", data_dir=tmp_path, port=0,
                               **options))  # type: ignore[arg-type]
        self.up.clock = lambda: self.now
        self.up.progress.note = lambda message: None
        monkeypatch.setattr(up_module, "start", self.start)
        self.up.children = [self.start(self.up.services["evaluator"], 0, tmp_path, REPO)]

    def start(self, service: Service, replica: int, logs: Path, cwd: Path, restarts: int = 0,
              last_error: str = "") -> Child:
        self.starts.append(restarts)
        self.reasons.append(last_error)
        return Child(service.name, service.name, replica, FakeProc(), logs / "x.log", self.now)  # type: ignore[arg-type]

    def crash_after(self, uptime: float) -> None:
        """The current process runs `uptime` s and is killed; supervise until it has been restarted."""
        self.now += uptime
        self.up.children[0].proc.code = -9  # type: ignore[attr-defined]
        count = len(self.starts)
        while len(self.starts) == count:
            self.up._supervise()
            self.now += 0.25


def test_supervise_restarts_forever_with_backoff_and_tells_the_child(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path, monkeypatch)
    started = h.now
    h.crash_after(QUICK)
    assert h.now - started - QUICK == pytest.approx(1.0, abs=0.3)  # the first delay
    for _ in range(20):  # a stable run between crashes: restarted every time, never given up
        h.crash_after(60.0)
    assert h.starts == list(range(22))  # each start is told how often it was restarted
    assert h.reasons[0] == "" and h.reasons[1].startswith("exit -9: ")  # and why its predecessor ended
    assert h.up.crashes["evaluator"].restarts == 21


def test_supervise_gives_up_after_k_quick_crashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path, monkeypatch, max_quick_crashes=3)
    h.crash_after(60.0)
    h.crash_after(QUICK)  # the crash after a stable run began a streak (1); this is crash 2
    with pytest.raises(ServiceFailed, match="evaluator exited with code -9, crash 3 in a row within 10s"):
        h.crash_after(QUICK)
    assert h.starts == [0, 1, 2]
