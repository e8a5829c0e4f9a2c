"""`rlfleet sweep` end to end: real trials (each a real `rlfleet up` of CartPole DQN on 127.0.0.1), two at once on
their own ports, scored by the held-out test each run's journal records; its table, best config and plot; and a
sweep killed with SIGKILL mid-trial that resumes to completion, leaving no process of the killed trial behind.

The trials are runs with no threshold and a budget of 10,000 env steps: each trains that far, tests its best policy
on held-out seeds and ends, so every trial has a score whether it learnt much or not. Collectors are held to the
learner's pace (few samples per insert, a small tolerance), so that a learner slowed by a busy machine still
publishes and validates policies within the budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from rlfleet.coordinator.journal.database import stored_meta
from rlfleet.launcher.child_run import group_members
from rlfleet.launcher.configs import read_config
from tests.support.repo import REPO

pytestmark = pytest.mark.slow


def write_spec(tmp_path: Path, trials: int, parallel: int, budget: int = 10_000, **changes: object) -> Path:
    spec: dict[str, object] = {
            "base_config": str(REPO / "configs" / "cartpole_dqn.yaml"), "study": "quick", "trials": trials,
            "parallel": parallel, "objective": {"kind": "test"}, "output_dir": str(tmp_path / "out"),
            "set": {"env.solve_threshold": None, "budget.max_env_steps": budget, "evaluation.test_episodes": 10,
                    "algo.publish_every": 20, "replay.samples_per_insert": 4, "collector.chunk_steps": 64,
                    "replay.tolerance_transitions": 1024},  # collectors wait for the learner, however slow
            "space": {"algo.learning_rate": {"type": "float", "low": 5e-4, "high": 5e-3, "log": True},
                      "algo.target_update_every": {"type": "int", "low": 50, "high": 500}},
            "pruner": {"startup_trials": 2, "warmup_env_steps": 0, "interval_env_steps": 1000}, **changes}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def sweep_argv(spec: Path) -> list[str]:
    return [sys.executable, "-m", "rlfleet.launcher", "sweep", str(spec)]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def load(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name="quick", storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")


def test_a_two_trial_sweep_writes_its_table_best_config_and_plot(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, trials=2, parallel=2)
    done = subprocess.run(sweep_argv(spec), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    study = load(tmp_path)
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"], done.stdout
    ports = {t.user_attrs["port"] for t in trials}
    assert len(ports) == 2  # the two ran at once, each on its own port, in its own data directory
    for t in trials:
        run_dir = Path(t.user_attrs["run_dir"])
        assert run_dir.is_relative_to(tmp_path / "out" / "trials" / f"{t.number:04d}")
        meta = stored_meta(run_dir / "coordinator.sqlite", "judge", "config")
        assert t.value == meta["judge"]["tests"][-1]["mean"]  # the journal's held-out test, not a validation
        algo = meta["config"]["algo"]  # the run started with the trial's settings
        assert algo["learning_rate"] == pytest.approx(t.params["algo.learning_rate"])
        assert algo["target_update_every"] == t.params["algo.target_update_every"]
        assert t.intermediate_values, "the pruner was fed no validation curve"
    out = tmp_path / "out"
    table = (out / "trials.csv").read_text().splitlines()
    assert table[0].split(",")[:2] == ["number", "state"] and len(table) == 3
    assert "| 0 | complete |" in (out / "trials.md").read_text()
    best = max(trials, key=lambda t: t.value)
    text = (out / "best_config.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=run-config.schema.json\n")
    assert (out / "run-config.schema.json").is_file()
    config = read_config(out / "best_config.yaml")  # a run config itself
    assert config.algo.learning_rate == pytest.approx(best.params["algo.learning_rate"])
    assert config.algo.target_update_every == best.params["algo.target_update_every"]
    assert config.budget.max_env_steps == 10_000
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sweep_killed_mid_trial_resumes_to_completion_and_leaves_no_orphan(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, trials=1, parallel=1)
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115 - closed below, the sweep writes to it meanwhile
    first = subprocess.Popen(sweep_argv(spec), cwd=tmp_path, env=env(), stdout=log, stderr=subprocess.STDOUT)
    journal_dir = tmp_path / "out" / "trials" / "0000" / "data" / "runs"
    deadline = time.monotonic() + 90
    while not _training(journal_dir):  # mid-trial: its run is collecting
        assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()
        time.sleep(0.5)
    killed = load(tmp_path).get_trials()[0]
    first.send_signal(signal.SIGKILL)
    first.wait()
    log.close()

    done = subprocess.run(sweep_argv(spec), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "trial 0 was left running by an earlier sweep: marked failed and queued to run again" in done.stdout
    trials = load(tmp_path).get_trials()
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].user_attrs["retry_of"] == 0 and trials[1].params == killed.params
    assert group_members(killed.user_attrs["pgid"], killed.user_attrs["since"]) == []
    rows = (tmp_path / "out" / "trials.csv").read_text().splitlines()
    assert rows[1].startswith("0,fail,") and rows[2].startswith("1,complete,") and "re-runs trial 0" not in rows[1]


def _training(runs: Path) -> bool:
    found = sorted(runs.glob("*/coordinator.sqlite")) if runs.is_dir() else []
    return bool(found) and (stored_meta(found[0], "data").get("data") or {}).get("env_steps", 0) > 0


def test_sigterm_stops_the_running_trial_in_order_and_queues_it_again(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, trials=1, parallel=1)
    sweep = subprocess.Popen(sweep_argv(spec), cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    journal_dir = tmp_path / "out" / "trials" / "0000" / "data" / "runs"
    deadline = time.monotonic() + 90
    while not _training(journal_dir):
        assert sweep.poll() is None and time.monotonic() < deadline
        time.sleep(0.5)
    sweep.send_signal(signal.SIGTERM)
    output, _ = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, output
    assert "trial 0 stopped with the sweep; queued to run again" in output
    trials = load(tmp_path).get_trials()
    assert [t.state.name for t in trials] == ["FAIL", "WAITING"] and trials[1].user_attrs["retry_of"] == 0
    assert group_members(trials[0].user_attrs["pgid"], trials[0].user_attrs["since"]) == []
    run_dir = next(journal_dir.iterdir())
    assert stored_meta(run_dir / "coordinator.sqlite", "lifecycle")["lifecycle"]["state"] == "stopped"  # in order
    assert (tmp_path / "out" / "trials.csv").read_text().splitlines()[1].startswith("0,fail,")


def test_a_trial_trailing_the_median_is_pruned_and_its_run_stopped_through_the_control_plane(tmp_path: Path) -> None:
    """One trial at a time: a learning rate that trains, then one that cannot (1e-7). Sampler seed 10 draws them in
    that order (checked below), so the second trails the first's curve and the median pruner stops it early. A budget
    of 30,000 env steps: at 10,000 the first had only just pulled clear (best validation 40.8 by 7,000, 153.8 by
    10,000), and the second was pruned at 11,000-14,000, its run stopping up to 5,000 env steps later."""
    good, frozen = 0.0023, 1e-7
    spec = write_spec(tmp_path, trials=2, parallel=1, budget=30_000,
                      space={"algo.learning_rate": {"type": "categorical", "choices": [good, frozen]}},
                      sampler={"seed": 10, "startup_trials": 4},
                      pruner={"startup_trials": 1, "warmup_env_steps": 0, "interval_env_steps": 1000})
    done = subprocess.run(sweep_argv(spec), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    trials = load(tmp_path).get_trials()
    assert [t.params["algo.learning_rate"] for t in trials] == [good, frozen]
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED"], done.stdout
    pruned = trials[1]
    assert "trial 1 pruned at" in done.stdout
    step = max(pruned.intermediate_values)  # the grid point it was pruned at trails the first trial's there
    assert pruned.intermediate_values[step] < trials[0].intermediate_values[step]
    lifecycle = stored_meta(Path(pruned.user_attrs["run_dir"]) / "coordinator.sqlite", "lifecycle")["lifecycle"]
    # stopped through the control plane before the env-step budget could end it
    assert lifecycle["state"] == "stopped" and "pruned by `rlfleet sweep`" in lifecycle["message"]
    assert step < 30_000 and pruned.user_attrs["env_steps"] < 30_000
    assert group_members(pruned.user_attrs["pgid"], pruned.user_attrs["since"]) == []
    assert (tmp_path / "out" / "trials.csv").read_text().splitlines()[2].startswith("1,pruned,")
