"""The whole collector process in-process (real rollout and store, fake coordinator): how it ends."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch

from collector_worker import main as collector_main
from collector_worker.rollout import Chunk, Rollout
from shared.config.run_config import CollectorConfig, EnvConfig, SamplingConfig
from shared.policy.files import save_policy
from shared.storage.local import LocalStore
from shared.wire import CollectorTask, Directive, PolicyRef
from shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK, run_session
from tests.support.fake_coordinator import FakeCoordinator, make_session
from tests.support.policies import CARTPOLE, EPSILON_GREEDY, manifest, policy_state

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


@pytest.fixture
def published(tmp_path: Path) -> tuple[LocalStore, dict[int, PolicyRef]]:
    """Policies v1 and v2 of a CartPole DQN run, in a store."""
    store = LocalStore(tmp_path / "store")
    m = manifest(CARTPOLE, "q_values")
    refs = {v: save_policy(store, v, {k: torch.from_numpy(a) for k, a in policy_state(m, v).items()}, m)
            for v in (1, 2)}
    return store, refs


def following(fake: FakeCoordinator, store: LocalStore, holding: PolicyRef) -> collector_main.PolicyFollower:
    """A registered collector's follower acting with `holding`, as the coordinator published it."""
    session = make_session(fake, "collector")
    session.register()
    follower = collector_main.PolicyFollower(session, store, Rollout(EnvConfig(), 2, CARTPOLE, EPSILON_GREEDY, 0))
    session.update(Directive(run_state="running", policy=holding))
    follower.refresh()
    assert follower.held == holding
    return follower


def test_a_stale_directive_naming_an_older_policy_is_not_followed_back(
        published: tuple[LocalStore, dict[int, PolicyRef]]) -> None:
    """A reply computed before v2 was published can arrive after one naming v2: a fresh heartbeat, which names
    v2, shows the coordinator still has it, and the collector keeps acting with v2."""
    store, refs = published
    fake = FakeCoordinator()
    fake.directive = lambda: Directive(run_state="running", policy=refs[2])  # type: ignore[method-assign]
    follower = following(fake, store, refs[2])
    follower.session.update(Directive(run_state="running", policy=refs[1]))  # the stale reply
    follower.refresh()
    assert follower.held == refs[2] and follower.version == 2
    assert follower.session.directive.policy == refs[2]  # the fresh heartbeat's directive replaced it
    assert len(fake.of("heartbeat")) == 1
    follower.session.close()


def test_a_lockstep_collector_ahead_of_a_rolled_back_coordinator_stops_waiting_and_re_syncs(
        published: tuple[LocalStore, dict[int, PolicyRef]]) -> None:
    """The coordinator's latest is v1 while the collector acts with v2, which it lost: waiting for a policy
    newer than v2 would wait forever (the learner waits for chunks acted with the coordinator's latest)."""
    store, refs = published
    fake = FakeCoordinator(max_wait_seconds=0.2)
    fake.directive = lambda: Directive(run_state="running", policy=refs[1])  # type: ignore[method-assign]
    follower = following(fake, store, refs[2])
    follower.session.heartbeat()  # the coordinator came back without v2
    collector_main._await_lockstep_policy(follower.session, follower)
    follower.refresh()
    assert follower.held == refs[1] and follower.version == 1
    follower.session.close()
