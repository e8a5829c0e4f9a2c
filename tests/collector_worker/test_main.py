"""The whole collector process in-process (real rollout and store, fake coordinator): how it ends."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from collector_worker import main as collector_main
from collector_worker.rollout import Chunk, Rollout
from shared.config.run_config import CollectorConfig, EnvConfig, SamplingConfig
from shared.storage.local import LocalStore
from shared.wire import CollectorTask, Directive, PolicyRef
from shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK, run_session
from tests.support.fake_coordinator import FakeCoordinator, make_session
from tests.support.policies import CARTPOLE, EPSILON_GREEDY

pytestmark = pytest.mark.timeout(60)


def task(force_sync: bool = False) -> CollectorTask:
    return CollectorTask(task_id="collect-0", env=EnvConfig(), spaces=CARTPOLE, behaviour=EPSILON_GREEDY,
                         collector=CollectorConfig(num_envs=2, chunk_steps=8),
                         sampling=SamplingConfig(force_sync=force_sync), seed=0, policy=None)


def collect(fake: FakeCoordinator, data_dir: Path) -> int:
    return run_session(make_session(fake, "collector"), data_dir, collector_main._claim_and_collect)


def test_run_ending_is_exit_0(tmp_path: Path) -> None:
    fake = FakeCoordinator(task())
    reports = 0

    def ack_then_solve(request):
        nonlocal reports
        reports += 1
        if reports == 3:
            fake.run_state = "solved"
        return fake._default("chunks", request)

    fake.handlers["chunks"] = ack_then_solve
    assert collect(fake, tmp_path) == EXIT_OK
    assert len(fake.of("chunks")) >= 3


def test_disk_full_in_the_uploader_is_a_non_zero_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Used to exit 0: the main loop saw the uploader gone as Stopped, an expected ending."""
    def no_space(self: LocalStore, relpath: str, data: bytes) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LocalStore, "put", no_space)
    fake = FakeCoordinator(task())
    assert collect(fake, tmp_path) == EXIT_CRASHED
    assert fake.of("chunks") == []


def test_an_unreportable_chunk_is_a_non_zero_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collect_chunk = Rollout.collect

    def nan_return(self: Rollout, *args, **kwargs) -> Chunk:
        chunk = collect_chunk(self, *args, **kwargs)
        chunk.episodes = [(float("inf"), 3, None)]  # EpisodeStat refuses it: a pydantic ValidationError
        return chunk

    monkeypatch.setattr(Rollout, "collect", nan_return)
    fake = FakeCoordinator(task())
    assert collect(fake, tmp_path) == EXIT_CRASHED
    assert fake.of("chunks") == []


def test_force_sync_wait_is_clamped_to_max_wait() -> None:
    fake = FakeCoordinator(max_wait_seconds=0.5)
    session = make_session(fake, "collector")
    session.register()
    collector_main._await_newer_policy(session, 0)  # asks for SYNC_WAIT_SECONDS = 2
    session.update(Directive(run_state="running",
                             policy=PolicyRef(version=4, path="policies/v4.safetensors", sha256="0" * 64)))
    collector_main._await_newer_policy(session, 3)  # a newer policy is already known: no wait at all
    collector_main._await_newer_policy(session, 4)
    session.close()
    beats = fake.of("heartbeat")
    assert [(b.request.url.params["newer_than"], float(b.request.url.params["wait"])) for b in beats] == [
        ("0", 0.5), ("4", 0.5)]
    assert all(b.status == 200 for b in beats)
    assert collector_main.SYNC_WAIT_SECONDS > 0.5
