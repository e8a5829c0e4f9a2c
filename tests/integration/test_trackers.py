"""Experiment trackers through `rlfleet up`: a short real run with `tracking: {wandb, mlflow}` leaves a W&B
offline run and an MLflow run in its directory, each holding the curves of TensorBoard and metrics.csv against
env steps (training return, validations, the end-of-budget held-out test, losses, steps/s), the resolved config
as parameters, and the curves and best policy as artifacts; read back with no network."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.repo import REPO
from tests.support.wandb_offline import read_offline_run


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _tracked(curve: list[tuple[float, float]], written: list[tuple[int, float]]) -> bool:
    """`curve` is the training-return curve of metrics.csv up to the run's end: the rows a coordinator writes
    while it stays up after the end (each tick's, the same numbers) are not sent to the trackers, ended by then."""
    return bool(curve) and curve == written[:len(curve)] and set(written[len(curve):]) <= {curve[-1]}


@pytest.mark.slow
def test_a_run_reaches_wandb_offline_and_mlflow_with_its_curves_config_and_artifacts(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "configs" / "cartpole_dqn.yaml").read_text())
    config["algo"].update(publish_every=20, report_every=10, net={"hidden": [64, 64]})
    config["replay"].update(samples_per_insert=4, tolerance_transitions=1024)
    # No threshold: the run trains to its budget, then the best validated policy takes a held-out test.
    config["env"]["solve_threshold"] = None
    config["evaluation"] = {"episodes": 4, "num_envs": 2, "test_episodes": 10, "test_num_envs": 10}
    config["tracking"] = {"wandb": {"project": "rlfleet-tests", "tags": ["dqn", "ci"]},
                          "mlflow": {"experiment": "trackers-test"}}
    path = tmp_path / "tracked.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(path), "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--set", "budget.max_env_steps=6000", "--set", "collector.chunk_steps=16"],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env={**os.environ, "WANDB_MODE": "online"})  # the config's offline mode wins over the environment's
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "budget_exhausted"
    # The summary is the status as the run ended, before the trackers were handed their artifacts.
    assert [(t["name"], t["error"], t["dropped"]) for t in summary["trackers"]] == [
        ("wandb", None, 0), ("mlflow", None, 0)]
    metrics = [r for r in _rows(run_dir / "metrics.csv") if r["recent_return_mean"]]
    returns = [(int(r["env_steps"]), float(r["recent_return_mean"])) for r in metrics]
    validations = [(int(r["env_steps"]), float(r["mean"])) for r in _rows(run_dir / "evaluations.csv")]
    tests = [(int(r["env_steps"]), float(r["mean"])) for r in _rows(run_dir / "tests.csv")]
    assert returns and validations and tests and returns[-1][0] >= 6000

    wandb = read_offline_run(run_dir)
    assert (wandb.project, wandb.name, wandb.tags) == ("rlfleet-tests", run_dir.name, ["dqn", "ci"])
    assert _tracked(wandb.curve("charts/episodic_return"), returns)
    assert wandb.curve("eval/episodic_return") == validations
    assert wandb.curve("eval/test_episodic_return") == tests
    assert wandb.curve("losses/td_loss") and wandb.curve("charts/SPS")
    assert wandb.config["algo"]["name"] == "dqn" and wandb.config["budget"]["max_env_steps"] == 6000
    assert wandb.artifacts[f"{run_dir.name}-policy"] == ["policy.safetensors"]
    assert {"metrics.csv", "evaluations.csv", "tests.csv", "learning_curve.png"} <= set(
        wandb.artifacts[f"{run_dir.name}-curves"])
    assert wandb.summary["run_state"] == "budget_exhausted"

    from mlflow.tracking import MlflowClient

    kept = json.loads((run_dir / "mlflow-run.json").read_text())
    assert kept["tracking_uri"] == f"sqlite:///{run_dir.resolve() / 'mlflow.db'}"
    client = MlflowClient(kept["tracking_uri"])
    history = client.get_metric_history(kept["run_id"], "charts/episodic_return")
    assert _tracked([(m.step, m.value) for m in history], returns)
    history = client.get_metric_history(kept["run_id"], "eval/episodic_return")
    assert [(m.step, m.value) for m in history] == validations
    history = client.get_metric_history(kept["run_id"], "eval/test_episodic_return")
    assert [(m.step, m.value) for m in history] == tests
    run = client.get_run(kept["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert client.get_experiment(run.info.experiment_id).name == "trackers-test"
    assert run.data.params["algo.name"] == "dqn" and run.data.params["collector.chunk_steps"] == "16"
    assert [a.path for a in client.list_artifacts(kept["run_id"], "policy")] == ["policy/policy.safetensors"]
    assert "curves/metrics.csv" in [a.path for a in client.list_artifacts(kept["run_id"], "curves")]
