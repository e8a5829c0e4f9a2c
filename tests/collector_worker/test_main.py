"""The whole collector process in-process (real rollout and store, fake coordinator): how it ends."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import httpx
import pytest
import torch

from rlfleet.collector_worker import main as collector_main
from rlfleet.collector_worker.rollout import Chunk, Rollout
from rlfleet.shared.config.run_config import CollectorConfig, EnvConfig, SamplingConfig
from rlfleet.shared.policy.files import save_policy
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import CollectorTask, Directive, HeartbeatResponse, PolicyRef
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK, run_session
from tests.support.fake_coordinator import FakeCoordinator, make_session, reply
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


def ref(version: int) -> PolicyRef:
    return PolicyRef(version=version, path=f"policies/v{version}.safetensors", sha256="0" * 64)


def sync_wait(fake: FakeCoordinator, newer_after: int | None, version: int) -> collector_main.SyncWait:
    """A registered collector's force_sync wait, with the fake's heartbeats naming policy `version` until the
    `newer_after`-th, then `version + 1` (never, for None); each beat takes a little of its `wait`."""
    beats = 0

    def heartbeat(request: httpx.Request) -> httpx.Response:
        nonlocal beats
        beats += 1
        time.sleep(min(0.02, float(request.url.params.get("wait", 0))))
        newer = newer_after is not None and beats >= newer_after
        return reply(HeartbeatResponse(lease_seconds=fake.lease_seconds, directive=Directive(
            run_state="running", policy=ref(version + 1 if newer else version))))

    fake.handlers["heartbeat"] = heartbeat
    session = make_session(fake, "collector")
    session.register()
    session.update(Directive(run_state="running", policy=ref(version)))
    follower = collector_main.PolicyFollower(session, LocalStore(Path("/nonexistent")),
                                             Rollout(EnvConfig(), 2, CARTPOLE, EPSILON_GREEDY, 0))
    return collector_main.SyncWait(session, follower)


def test_force_sync_waits_as_long_as_the_learner_takes_in_bounded_long_polls() -> None:
    """It waited SYNC_WAIT_SECONDS once and then collected with the old policy: with updates slower than that,
    every such chunk was discarded as stale once the new policy came."""
    fake = FakeCoordinator(max_wait_seconds=0.5)
    wait = sync_wait(fake, newer_after=5, version=3)
    wait.await_newer(3)
    beats = fake.of("heartbeat")
    assert [(b.request.url.params["newer_than"], float(b.request.url.params["wait"])) for b in beats] == [
        ("3", 0.5)] * 5  # each poll clamped to the coordinator's max_wait_seconds
    assert wait.session.directive.policy == ref(4) and wait.gave_up == 0
    assert 0 < wait.longest < wait.FIRST_BOUND_SECONDS
    wait.await_newer(2)  # a newer policy is already known: no wait at all
    assert len(fake.of("heartbeat")) == 5
    assert collector_main.SYNC_WAIT_SECONDS > 0.5


def test_a_round_with_no_newer_policy_ends_at_a_multiple_of_the_longest_round(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner restarted and lost the batch, say: no newer policy comes. The collector collects again with the
    same version (lag 0 while nothing newer exists) after its bound, and says so."""
    monkeypatch.setattr(collector_main.SyncWait, "FIRST_BOUND_SECONDS", 0.2)
    monkeypatch.setattr(collector_main.SyncWait, "MIN_BOUND_SECONDS", 0.1)
    wait = sync_wait(FakeCoordinator(max_wait_seconds=0.5), newer_after=None, version=3)
    started = time.monotonic()
    wait.await_newer(3)
    assert wait.gave_up == 1 and 0.2 <= time.monotonic() - started < 2
    assert wait.longest == 0.0  # a round that timed out is not a measure of the learner
    wait.longest = 0.05
    assert wait.bound() == 0.2  # ROUND_FACTOR times the longest round
    wait.longest = 0.01
    assert wait.bound() == 0.1  # never below MIN_BOUND_SECONDS


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
