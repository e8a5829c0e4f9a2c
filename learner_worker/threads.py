"""How many torch threads the learner computes with: `RLFLEET_TORCH_THREADS`, or by default the cores it may use.

A learner's update is the one place in the fleet where one process has a large, parallel computation to do (a
convolutional network over a batch of frames); left at one thread where cores sit idle, it leaves them idle.
Collectors, the evaluator and the coordinator stay at one (`launcher/__init__.py` sets OMP_NUM_THREADS=1 for them).

Threads beyond the cores that are actually free cost far more than they bring: an OpenMP team waits at every
barrier for its slowest thread, and a thread the scheduler preempted for another busy process is that thread.
Measured on this project's 2-core machine while other processes kept about 2.5 cores' worth busy: an update of
1,024 4x84x84 rows took 32-34 s at one thread and 75-88 s at two. So `auto` means the cores this process may use,
and `rlfleet up`, which knows what else it starts on the same host, gives the learner those cores minus one per
collector, or all of them under force_sync or lag 1, where the collectors wait while it trains (launcher/up.py
`learner_threads`); alone in its container or pod, a learner takes its quota. Idle threads sleep rather than spin
(OMP_WAIT_POLICY, launcher/__init__.py), or they would take the cores back from the collectors between updates.

"The cores it may use" is the smaller of the CPUs this process may be scheduled on (`os.sched_getaffinity`, which
`taskset` and Kubernetes' static CPU manager narrow) and its cgroup's CPU quota rounded up (`cpu.max` in cgroup v2,
`cpu.cfs_quota_us` / `cpu.cfs_period_us` in v1: a pod's CPU limit, a container's `--cpus`), since threads beyond the
quota are throttled, not run. The ranks of a learner group on one host (torchrun's LOCAL_WORLD_SIZE) split those
cores between them. A deterministic run trains at one thread whatever is set (learner_worker/trainer.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Literal

CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def cgroup_quota(v2: Path = CGROUP_V2, v1: tuple[Path, Path] = CGROUP_V1) -> float | None:
    """The CPUs this process's cgroup may use per period, or None where there is no quota or none is readable."""
    try:
        quota, period = v2.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us, period_us = (int(path.read_text()) for path in v1)
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


def available_cores(v2: Path = CGROUP_V2, v1: tuple[Path, Path] = CGROUP_V1) -> int:
    """The cores this process can keep busy: its CPU affinity, capped by its cgroup's quota; at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_quota(v2, v1)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def torch_threads(setting: int | Literal["auto"]) -> int:
    """The intra-op thread count for `RLFLEET_TORCH_THREADS`: the number given, or for auto `available_cores()`
    shared by the learner group's ranks on this host."""
    if setting != "auto":
        return setting
    return max(1, available_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
