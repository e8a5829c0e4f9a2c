"""Learner hooks driven by the whole learner in-process (real trainers, store and prefetcher; fake coordinator):
each event fires at its point of training with the right view, a hook that raises is switched off and reported
while training goes on, and a hook that does not load ends the learner as a config error."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from rlfleet.learner_worker.cache import ChunkCache
from rlfleet.learner_worker.hooks import learner_hooks
from rlfleet.shared.config.hooks import HookConfig
from rlfleet.shared.config.run_config import LearnerConfig, RunConfig
from rlfleet.shared.wire import Ack, LearnerTask, SampleResponse, Score
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK
from tests.support.configs import make_config, small_run_config
from tests.support.fake_coordinator import FakeCoordinator, reply
from tests.support.hooks import LOG_VARIABLE
from tests.support.learner import Payloads, learn, ppo_config, prioritized
from tests.support.policies import learner_task

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)
RECORD, BOOM, TAMPER = "tests.support.hooks:record", "tests.support.hooks:boom", "tests.support.hooks:tamper"
DQN_LOSSES = {"td_loss", "q_mean", "grad_norm"}


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Hooks are loaded once per process (a switched-off hook stays off): each test starts as a new learner."""
    learner_hooks.cache_clear()
    yield
    learner_hooks.cache_clear()


@pytest.fixture
def hook_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the `record` hooks write what they saw, one view per line."""
    path = tmp_path / "hooks.jsonl"
    monkeypatch.setenv(LOG_VARIABLE, str(path))
    return path


def views(hook_log: Path) -> list[dict]:
    return [json.loads(line) for line in hook_log.read_text().splitlines()] if hook_log.exists() else []


def with_hooks(config: RunConfig, *hooks: dict) -> LearnerTask:
    return learner_task(config).model_copy(update={"learner": LearnerConfig(
        hooks=tuple(HookConfig.model_validate(hook) for hook in hooks))})


def run_until_reported(task: LearnerTask, data_dir: Path, iteration: int, **payloads: Any) -> FakeCoordinator:
    """A fake coordinator for `task` whose run ends (solved) with the learn-info report of `iteration`: the
    learner stops right there, so what the hooks saw is exact."""
    fake = FakeCoordinator(task)

    def learn_info(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["iteration"] >= iteration:
            fake.run_state = "solved"
        return reply(Ack(directive=fake.directive()))

    fake.handlers["learn-info"] = learn_info
    Payloads(data_dir, **payloads).serve(fake)
    return fake


def hook_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("learner hook ")]


def test_replay_loop_fires_each_event_with_its_view_and_a_raising_hook_is_switched_off(
        tmp_path: Path, hook_log: Path, caplog: pytest.LogCaptureFixture) -> None:
    """small_run_config: batch_size=32, publish_every=20, report_every=10; boom is due (and raises) first at 3."""
    task = with_hooks(small_run_config(), {"at": "start", "call": RECORD}, {"at": "every", "every": 5, "call": TAMPER},
                      {"at": "every", "every": 5, "call": RECORD}, {"at": "every", "every": 3, "call": BOOM},
                      {"at": "publish", "call": RECORD}, {"at": "end", "call": RECORD})
    fake = run_until_reported(task, tmp_path, iteration=40)
    with caplog.at_level(logging.INFO):
        assert learn(fake, tmp_path) == EXIT_OK
    seen = [(v["event"], v["iteration"], v["transitions_trained"], v["policy_version"]) for v in views(hook_log)]
    assert seen == [("start", 0, 0, 0), *[("every", k, 32 * k, k // 20) for k in (5, 10, 15)],
                    ("publish", 20, 640, 1), *[("every", k, 32 * k, k // 20) for k in (20, 25, 30, 35)],
                    ("publish", 40, 1280, 2), ("every", 40, 1280, 2), ("end", 40, 1280, 2)]
    first, *later = views(hook_log)
    assert first["losses"] == {} and all(set(v["losses"]) == DQN_LOSSES for v in later)  # tamper cleared its own
    assert {v["run_name"] for v in later} == {"test-run"} and {v["algorithm"] for v in later} == {"dqn"}
    assert later[-1]["error"] is None and later[-1]["losses"] == later[-2]["losses"]  # the last update's

    (failure,) = hook_failures(caplog)  # once, with its traceback, though due every 3 updates
    assert failure.getMessage() == ("learner hook tests.support.hooks:boom@every failed at iteration 3; "
                                    "it is switched off")
    assert failure.exc_info is not None and str(failure.exc_info[1]) == "boom at every 3"
    reports = [r.body for r in fake.of("learn-info")]
    assert [r["iteration"] for r in reports] == [10, 20, 30, 40]  # training went on
    assert all(set(r["losses"]) == DQN_LOSSES for r in reports)
    assert all(r["hooks_failed"] == {"tests.support.hooks:boom@every": "at iteration 3: ValueError: boom at every 3"}
               for r in reports)


def test_hooks_see_the_runs_env_steps_recent_return_and_latest_validation_and_test(tmp_path: Path,
                                                                                    hook_log: Path) -> None:
    """What the coordinator's replies to the learner carry (coordinator/operations/context.py), as the learner
    last heard it at each event (the fake's env steps grow with every sample served)."""
    task = with_hooks(small_run_config(), {"at": "start", "call": RECORD}, {"at": "every", "every": 10, "call": RECORD})
    fake = run_until_reported(task, tmp_path, iteration=20)
    fake.env_steps_total = 4096
    fake.progress = {"recent_return_mean": 87.5,
                     "latest_validation": Score(policy_version=3, mean=120.0, env_steps=3000),
                     "latest_test": Score(policy_version=2, mean=99.0, env_steps=2500)}
    assert learn(fake, tmp_path) == EXIT_OK
    seen = views(hook_log)
    assert [(v["event"], v["iteration"]) for v in seen] == [("start", 0), ("every", 10), ("every", 20)]
    steps = [v["env_steps"] for v in seen]
    assert steps[0] >= 4096 and steps == sorted(steps) and steps[-1] > steps[0]
    for view in seen:
        assert view["recent_return_mean"] == 87.5
        assert view["latest_validation"] == {"policy_version": 3, "mean": 120.0, "env_steps": 3000}
        assert view["latest_test"] == {"policy_version": 2, "mean": 99.0, "env_steps": 2500}


def test_chunk_loop_publishes_its_first_policy_after_start_and_before_any_update(tmp_path: Path,
                                                                                hook_log: Path) -> None:
    task = with_hooks(ppo_config(), {"at": "publish", "call": RECORD}, {"at": "start", "call": RECORD},
                      {"at": "end", "call": RECORD})
    assert learn(run_until_reported(task, tmp_path, iteration=3, logp=True), tmp_path) == EXIT_OK
    seen = [(v["event"], v["iteration"], v["policy_version"]) for v in views(hook_log)]
    assert seen == [("start", 0, 0), ("publish", 0, 1), ("publish", 1, 2), ("publish", 2, 3), ("publish", 3, 4),
                    ("end", 3, 4)]


def test_end_hooks_hear_of_a_divergence(tmp_path: Path, hook_log: Path) -> None:
    task = with_hooks(make_config(prioritized(), algo={"learning_rate": 1e38}), {"at": "end", "call": RECORD})
    assert learn(run_until_reported(task, tmp_path, iteration=10), tmp_path) == EXIT_CRASHED
    (end,) = views(hook_log)
    diverged = re.match(r"TrainingDiverged: training diverged at iteration (\d+): non-finite td_loss=nan", end["error"])
    assert diverged, end["error"]
    assert end["iteration"] == int(diverged[1]) - 1  # the update that diverged did not count


def test_an_end_hook_failing_after_the_run_ended_is_reported(tmp_path: Path, hook_log: Path) -> None:
    task = with_hooks(small_run_config(), {"at": "end", "call": BOOM}, {"at": "end", "call": RECORD})
    fake = run_until_reported(task, tmp_path, iteration=10)
    assert learn(fake, tmp_path) == EXIT_OK
    assert [v["event"] for v in views(hook_log)] == ["end"]  # the other end hook ran all the same
    reports = [r.body for r in fake.of("learn-info")]
    assert [(r["iteration"], r["hooks_failed"]) for r in reports] == [
        (10, {}), (10, {"tests.support.hooks:boom@end": "at iteration 10: ValueError: boom at end 10"})]


def test_a_learner_crash_skips_the_end_hooks(tmp_path: Path, hook_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: ChunkCache, sample: SampleResponse) -> list:
        raise RuntimeError("bug in the cache")

    monkeypatch.setattr(ChunkCache, "batches", broken)
    task = with_hooks(small_run_config(), {"at": "start", "call": RECORD}, {"at": "end", "call": RECORD})
    assert learn(run_until_reported(task, tmp_path, iteration=10), tmp_path) == EXIT_CRASHED
    assert [v["event"] for v in views(hook_log)] == ["start"]


def test_a_switched_off_hook_stays_off_in_the_next_trainer_of_the_process(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    task = with_hooks(small_run_config(), {"at": "start", "call": BOOM})
    for until in (10, 20):  # as after a lost lease: a new trainer, resumed from the checkpoint
        fake = run_until_reported(task, tmp_path, iteration=until)
        with caplog.at_level(logging.INFO):
            assert learn(fake, tmp_path) == EXIT_OK
    assert len(hook_failures(caplog)) == 1
    assert [r.body["hooks_failed"] for r in fake.of("learn-info")] == [
        {"tests.support.hooks:boom@start": "at iteration 0: ValueError: boom at start 0"}]


def test_a_hook_that_does_not_load_in_the_learner_ends_it_as_a_config_error(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    task = with_hooks(small_run_config(), {"at": "end", "call": RECORD},
                      {"at": "end", "call": "tests.support.hooks:recrod"})
    fake = run_until_reported(task, tmp_path, iteration=10)
    with caplog.at_level(logging.INFO):
        assert learn(fake, tmp_path) == EXIT_CRASHED
    assert caplog.records[-1].getMessage() == (
        "learner exits with status 4: main thread: HookLoadError: learner.hooks[1].call: "
        "module 'tests.support.hooks' has no function 'recrod' (did you mean 'record'?); "
        "write it as 'package.module:function'")
    assert fake.of("sample") == []  # refused before training
