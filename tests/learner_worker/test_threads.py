"""The learner's torch threads: the number the user gives, or the cores this process may use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlfleet.learner_worker.threads import available_cores, cgroup_quota, torch_threads
from rlfleet.shared.worker.settings import WorkerSettings

MISSING = Path("/nonexistent/cpu.max")
NO_V1 = (Path("/nonexistent/quota"), Path("/nonexistent/period"))


def test_a_cgroup_v2_quota_caps_the_cores(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: a second thread still gets half a core
    assert cgroup_quota(cpu_max, NO_V1) == 1.5
    assert available_cores(cpu_max, NO_V1) == min(2, len(os.sched_getaffinity(0)))
    cpu_max.write_text("max 100000\n")
    assert cgroup_quota(cpu_max, NO_V1) is None
    assert available_cores(cpu_max, NO_V1) == len(os.sched_getaffinity(0))


def test_a_cgroup_v1_quota_is_read_where_v2_is_absent(tmp_path: Path) -> None:
    quota, period = tmp_path / "quota", tmp_path / "period"
    quota.write_text("50000\n")
    period.write_text("100000\n")
    assert cgroup_quota(MISSING, (quota, period)) == 0.5
    assert available_cores(MISSING, (quota, period)) == 1
    quota.write_text("-1\n")  # no limit
    assert cgroup_quota(MISSING, (quota, period)) is None


def test_auto_is_the_default_and_a_number_is_taken_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLFLEET_TORCH_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert WorkerSettings().torch_threads == "auto"
    assert torch_threads("auto") == available_cores()
    monkeypatch.setenv("RLFLEET_TORCH_THREADS", "3")
    assert torch_threads(WorkerSettings().torch_threads) == 3
    monkeypatch.setenv("RLFLEET_TORCH_THREADS", "0")
    with pytest.raises(ValueError, match="torch_threads"):
        WorkerSettings()


def test_ranks_of_a_learner_group_on_one_host_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(available_cores() * 2))
    assert torch_threads("auto") == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert torch_threads("auto") == available_cores()
