"""Dataset runs through the real app: batches by epoch until the run ends, refusals, and a coordinator that
will not start on a recording it cannot serve."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.main import create_app
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.payloads.recordings import DatasetError
from rlfleet.shared.storage.factory import open_datasets, open_store
from rlfleet.shared.storage.layout import RunLayout
from tests.support.api import assert_error_body, auth, claim, get_status, make_settings, register, running_client
from tests.support.chunks import write_policy
from tests.support.datasets import write_demo_dataset

BC_RUN = RunConfig.model_validate({"name": "bc-api", "env": {"id": "CartPole-v1"},
                                   "algo": {"name": "bc", "dataset": "demo", "epochs": 2}})


def _settings(tmp_path: Path, config: RunConfig = BC_RUN, dataset: bool = True) -> tuple[Any, dict[str, str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config_file = tmp_path / "bc.yaml"
    config_file.write_text(dump_run_config(config))
    settings, tokens = make_settings(tmp_path, config=config_file, run=config.name)
    if dataset:
        write_demo_dataset(open_datasets(settings.data_dir, None), n=10)  # type: ignore[arg-type]
    return settings, tokens


def _sample(client: TestClient, token: str, learner: str, size: int, name: str = "demo") -> Any:
    return client.post(f"/v1/datasets/{name}/sample", json={"worker_id": learner, "batch_size": size},
                       headers=auth(token))


def test_epochs_of_batches_then_the_run_ends(tmp_path: Path) -> None:
    settings, tokens = _settings(tmp_path)
    with running_client(settings) as client:
        collector = register(client, tokens["collector"], "collector")
        assert claim(client, tokens["collector"], collector)["task"]["work"] == "none"
        learner = register(client, tokens["learner"], "learner")
        claim(client, tokens["learner"], learner)
        status = get_status(client, tokens["read"])["dataset"]
        total = status["train_transitions"]
        assert status["name"] == "demo" and status["epoch"] == 1 and status["epochs"] == 2 and total > 0
        served = {1: 0, 2: 0}
        while True:
            batch = _sample(client, tokens["learner"], learner, 25).json()
            if not batch["files"]:
                break
            served[batch["epoch"]] += len(batch["rows"])
            assert len(batch["rows"]) == len(batch["file_index"]) <= 25
        assert served == {1: total, 2: total}
        # the learner's epoch scores reach status; the run waits for the evaluator's verdict on the last policy,
        # which the learner publishes before it reports the epoch (a run with no policy before the last epoch's
        # report learns models, and ends at that report)
        policy = write_policy(open_store(RunLayout(settings.data_dir, BC_RUN.name), "store"), 1)
        assert client.post("/v1/policies", json={"worker_id": learner, "policy": policy, "iteration": 20},
                           headers=auth(tokens["learner"])).status_code == 200
        for epoch in (1, 2):
            assert client.post("/v1/learn-info", json={
                "worker_id": learner, "iteration": 10 * epoch, "transitions_trained": epoch * total,
                "losses": {"nll": 0.1, "valid_nll": 0.5 / epoch, "valid_accuracy": 0.8 + 0.1 * epoch,
                           "epoch": float(epoch)}}, headers=auth(tokens["learner"])).status_code == 200
        time.sleep(0.5)  # a few ticks
        status = get_status(client, tokens["read"])
        assert status["run_state"] == "running"
        assert [(e["epoch"], e["scores"]["valid_accuracy"]) for e in status["dataset"]["epoch_scores"]] == [
            (1, 0.9), (2, 1.0)]
        evaluator = register(client, tokens["evaluator"], "evaluator")
        claim(client, tokens["evaluator"], evaluator)
        assert client.post("/v1/evaluations", json={"worker_id": evaluator, "policy_version": 1,
                                                     "returns": [100.0] * 10, "lengths": [100] * 10},
                           headers=auth(tokens["evaluator"])).status_code == 200
        deadline = time.monotonic() + 5
        while get_status(client, tokens["read"])["run_state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        after = get_status(client, tokens["read"])
        assert after["run_state"] == "budget_exhausted" and "2 epochs over dataset 'demo'" in after["run_message"]
        assert "v1, validated at 100.0" in after["run_message"]


def test_refusals(tmp_path: Path) -> None:
    settings, tokens = _settings(tmp_path)
    with running_client(settings) as client:
        learner = register(client, tokens["learner"], "learner")
        assert_error_body(_sample(client, tokens["learner"], learner, 4, name="other"), 404, "not_found",
                          hint="'demo'")
        assert_error_body(_sample(client, tokens["learner"], learner, 0), 422, "invalid", hint="batch_size")
        assert_error_body(_sample(client, tokens["collector"], learner, 4), 403, "forbidden")
    dqn_settings, dqn_tokens = make_settings(tmp_path / "dqn")
    with running_client(dqn_settings) as client:
        learner = register(client, dqn_tokens["learner"], "learner")
        assert_error_body(_sample(client, dqn_tokens["learner"], learner, 4), 409, "conflict",
                          hint="recorded dataset")


@pytest.mark.parametrize(("env", "dataset", "message"), [
    ("CartPole-v1", False, "not found"),
    ("Pendulum-v1", True, "recorded with spaces"),
])
def test_a_coordinator_will_not_serve_a_recording_it_cannot_use(tmp_path: Path, env: str, dataset: bool,
                                                                message: str) -> None:
    config = BC_RUN.model_copy(update={"env": BC_RUN.env.model_copy(update={"id": env})})
    settings, _ = _settings(tmp_path, config, dataset)
    with pytest.raises(DatasetError, match=message), TestClient(create_app(settings)):
        pass


def test_a_run_whose_model_is_no_policy_ends_when_the_last_epochs_scores_are_in(tmp_path: Path) -> None:
    """No policy, no evaluator: the run ends on the learner's report of the last epoch, not before."""
    config = RunConfig.model_validate({"name": "sl-api", "env": {"id": "CartPole-v1"},
                                       "algo": {"name": "supervised", "dataset": "demo", "epochs": 2}})
    settings, tokens = _settings(tmp_path, config)
    with running_client(settings) as client:
        learner = register(client, tokens["learner"], "learner")
        claim(client, tokens["learner"], learner)
        while _sample(client, tokens["learner"], learner, 1000).json()["files"]:
            pass

        def report(epoch: int) -> None:
            assert client.post("/v1/learn-info", json={
                "worker_id": learner, "iteration": epoch, "transitions_trained": epoch,
                "losses": {"loss": 0.1, "valid_loss": 0.2 / epoch, "valid_r2": 0.9, "epoch": float(epoch)}},
                headers=auth(tokens["learner"])).status_code == 200

        report(1)
        time.sleep(0.5)  # a few ticks: every epoch was served, but the last one's scores are not in
        assert get_status(client, tokens["read"])["run_state"] == "running"
        report(2)
        deadline = time.monotonic() + 5
        while get_status(client, tokens["read"])["run_state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        status = get_status(client, tokens["read"])
        assert status["run_state"] == "budget_exhausted" and status["policy_version"] == 0
        assert "all 2 epochs over dataset 'demo' were trained" in status["run_message"]


def test_a_dataset_run_with_no_threshold_tests_its_best_policy_before_it_ends(tmp_path: Path) -> None:
    config = BC_RUN.model_copy(update={"env": BC_RUN.env.model_copy(update={"solve_threshold": None}),
                                       "algo": BC_RUN.algo.model_copy(update={"epochs": 1})})
    settings, tokens = _settings(tmp_path, config)
    with running_client(settings) as client:
        learner = register(client, tokens["learner"], "learner")
        claim(client, tokens["learner"], learner)
        while _sample(client, tokens["learner"], learner, 100).json()["files"]:
            pass
        # published before the last epoch's report, as the learner does (else the run ends as a learner of models)
        policy = write_policy(open_store(RunLayout(settings.data_dir, BC_RUN.name), "store"), 1)
        assert client.post("/v1/policies", json={"worker_id": learner, "policy": policy, "iteration": 10},
                           headers=auth(tokens["learner"])).status_code == 200
        assert client.post("/v1/learn-info", json={
            "worker_id": learner, "iteration": 10, "transitions_trained": 10, "losses": {"epoch": 1.0}},
            headers=auth(tokens["learner"])).status_code == 200
        evaluator = register(client, tokens["evaluator"], "evaluator")
        claim(client, tokens["evaluator"], evaluator)
        assert not client.post("/v1/evaluations", json={"worker_id": evaluator, "policy_version": 1,
                                                         "returns": [100.0] * 10, "lengths": [100] * 10},
                               headers=auth(tokens["evaluator"])).json()["test_requested"]
        deadline = time.monotonic() + 5
        while get_status(client, tokens["read"])["test_in_flight"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        status = get_status(client, tokens["read"])
        assert (status["run_state"], status["test_in_flight"], status["no_threshold"]) == ("running", 1, True)
        tested = client.post("/v1/tests", json={"worker_id": evaluator, "policy_version": 1, "returns": [90.0] * 100,
                                                 "lengths": [90] * 100}, headers=auth(tokens["evaluator"]))
        assert tested.status_code == 200, tested.text
        after = get_status(client, tokens["read"])
        assert after["run_state"] == "budget_exhausted" and "1 epochs over dataset 'demo' were trained" in \
            after["run_message"]
        assert "no threshold: best policy v1 (validation 100.0; held-out test 90.0" in after["run_message"]
