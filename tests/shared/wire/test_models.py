"""shared.wire: requests are strict (no extra fields, no NaN/inf, constrained ids, hashes and paths)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.wire import (
    ChunkReport,
    ClaimResponse,
    CollectorTask,
    Directive,
    EpisodeStat,
    EvaluationReport,
    EvaluatorTask,
    LearnerTask,
    LearnReport,
    PolicyPublish,
    PolicyRef,
    RegisterRequest,
    SampleRequest,
    StopRequest,
)
from tests.support.policies import CARTPOLE, EPSILON_GREEDY, SAMPLING

SHA = "ab" * 32


def chunk_report(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "chunk_id": "c0ffee", "worker_id": "collector-1-abc123", "task_id": "collector-0",
        "payload_path": "chunks/collector-0/c0ffee.msgpack", "sha256": SHA, "size_bytes": 10, "env_steps": 16,
        "episodes": [{"ret": 12.5, "length": 12}], "policy_version": 0,
    }
    base.update(changes)
    return base


def _rejects(model: type[BaseModel], data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    locs = {".".join(str(p) for p in err["loc"]) for err in info.value.errors()}
    assert any(loc == field or loc.startswith(field + ".") for loc in locs), locs
    # the same document sent as JSON is rejected too (that is how it arrives over HTTP)
    with pytest.raises(ValidationError):
        model.model_validate_json(json.dumps(data, allow_nan=True))


def test_valid_chunk_report_round_trips() -> None:
    report = ChunkReport.model_validate(chunk_report())
    assert ChunkReport.model_validate_json(report.model_dump_json()) == report
    assert report.episodes == [EpisodeStat(ret=12.5, length=12)]


# ----- non-finite floats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_floats_rejected_everywhere(bad: float) -> None:
    _rejects(ChunkReport, chunk_report(episodes=[{"ret": bad, "length": 3}]), "episodes")
    _rejects(LearnReport, {"worker_id": "learner-1", "iteration": 1, "losses": {"td": bad},
                           "transitions_trained": 0}, "losses")
    _rejects(EvaluationReport, {"worker_id": "evaluator-1", "policy_version": 1, "returns": [1.0, bad],
                                "lengths": [1, 1]}, "returns")
    _rejects(Directive, {"run_state": "running", "pause_seconds": bad}, "pause_seconds")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_json_literals_rejected(literal: str) -> None:
    raw = '{"ret": ' + literal + ', "length": 1}'
    with pytest.raises(ValidationError):
        EpisodeStat.model_validate_json(raw)


# ----- extra fields -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (ChunkReport, chunk_report(extra_field=1)),
        (ChunkReport, chunk_report(episodes=[{"ret": 1.0, "length": 1, "discounted": 0.5}])),
        (RegisterRequest, {"kind": "collector", "name": "host", "admin": True}),
        (SampleRequest, {"worker_id": "learner-1", "batch_size": 32, "priority": 1}),
        (PolicyPublish, {"worker_id": "learner-1", "iteration": 3,
                         "policy": {"version": 1, "path": "policies/v1", "sha256": SHA, "url": "http://x"}}),
        (StopRequest, {"reason": "x", "force": True}),
    ],
    ids=["chunk", "nested-episode", "register", "sample", "nested-policy", "stop"],
)
def test_extra_fields_rejected(model: type[BaseModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate(data)


# ----- ids --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_id",
    ["", "../x", "..", ".hidden", "-leading-dash", "_x", "a/b", "a\\b", "a b", "a\n", "é", "a" * 129, "x;rm"],
)
@pytest.mark.parametrize("field", ["chunk_id", "worker_id", "task_id"])
def test_bad_ids_rejected(field: str, bad_id: str) -> None:
    _rejects(ChunkReport, chunk_report(**{field: bad_id}), field)


@pytest.mark.parametrize("good_id", ["a", "A9", "a" * 128, "collector-1-ab12cd", "x.y_z-1", "0"])
def test_good_ids_accepted(good_id: str) -> None:
    assert ChunkReport.model_validate(chunk_report(chunk_id=good_id)).chunk_id == good_id


def test_register_name_uses_id_rules() -> None:
    assert RegisterRequest(kind="learner", name="gpu-box.local").name == "gpu-box.local"
    _rejects(RegisterRequest, {"kind": "learner", "name": "../etc"}, "name")
    _rejects(RegisterRequest, {"kind": "admin", "name": "x"}, "kind")


# ----- sha256 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_sha",
    ["", "ab" * 31, "ab" * 32 + "a", "AB" * 32, "g" * 64, " " + "a" * 63, "a" * 63 + "\n", "0x" + "a" * 62],
    ids=["empty", "short", "long", "upper", "non-hex", "space", "newline", "0x"],
)
def test_bad_sha256_rejected(bad_sha: str) -> None:
    _rejects(ChunkReport, chunk_report(sha256=bad_sha), "sha256")
    _rejects(PolicyRef, {"version": 1, "path": "policies/v1", "sha256": bad_sha}, "sha256")


# ----- payload paths ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_path",
    ["", "..", "../x", "chunks/../../etc/passwd", "chunks/..", "chunks/./x", "/abs/path", "chunks\\x",
     "chunks//x", "chunks/x/", "a/b/c/d/e/f/g/h/i", "chunks/.x", "chunks/x\n"],
)
def test_bad_payload_paths_rejected(bad_path: str) -> None:
    _rejects(ChunkReport, chunk_report(payload_path=bad_path), "payload_path")
    _rejects(PolicyRef, {"version": 1, "path": bad_path, "sha256": SHA}, "path")


def test_eight_segment_path_accepted() -> None:
    assert PolicyRef(version=1, path="a/b/c/d/e/f/g/h", sha256=SHA).path == "a/b/c/d/e/f/g/h"


# ----- numeric bounds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"size_bytes": 0}, "size_bytes"),
        ({"env_steps": 0}, "env_steps"),
        ({"env_steps": 1_000_001}, "env_steps"),
        ({"policy_version": -1}, "policy_version"),
        ({"policy_version": 2**53 + 1}, "policy_version"),
        ({"episodes": [{"ret": 1.0, "length": 0}]}, "episodes"),
        ({"env_steps": 1.5}, "env_steps"),
    ],
    ids=str,
)
def test_chunk_report_bounds(changes: dict[str, Any], field: str) -> None:
    data = chunk_report(**changes)
    with pytest.raises(ValidationError) as info:
        ChunkReport.model_validate(data)
    assert any(str(err["loc"][0]) == field for err in info.value.errors())


def test_evaluation_report_needs_at_least_one_episode() -> None:
    _rejects(EvaluationReport, {"worker_id": "e1", "policy_version": 1, "returns": [], "lengths": []},
             "returns")
    _rejects(EvaluationReport, {"worker_id": "e1", "policy_version": 0, "returns": [1.0], "lengths": [1]},
             "policy_version")
    _rejects(EvaluationReport, {"worker_id": "e1", "policy_version": 1, "returns": [1.0], "lengths": [0]},
             "lengths")


@pytest.mark.parametrize(("batch_size", "num_batches"), [(0, 1), (4097, 1), (32, 0), (32, 257)])
def test_sample_request_bounds(batch_size: int, num_batches: int) -> None:
    with pytest.raises(ValidationError):
        SampleRequest(worker_id="learner-1", batch_size=batch_size, num_batches=num_batches)


def test_policy_version_starts_at_one() -> None:
    with pytest.raises(ValidationError):
        PolicyRef(version=0, path="policies/v0", sha256=SHA)


def test_learn_report_loss_names_are_ids_and_bounded() -> None:
    _rejects(LearnReport,
             {"worker_id": "l1", "iteration": 1, "losses": {"../x": 1.0}, "transitions_trained": 0}, "losses")
    too_many = {f"loss{i}": 0.0 for i in range(65)}
    with pytest.raises(ValidationError):
        LearnReport(worker_id="l1", iteration=1, losses=too_many, transitions_trained=0)


def test_stop_reason_length_limited() -> None:
    assert StopRequest().reason == "stopped by admin"
    with pytest.raises(ValidationError):
        StopRequest(reason="x" * 501)


# ----- tasks: a discriminated union -------------------------------------------------------------------------


def test_claim_response_discriminates_task_kinds() -> None:
    cfg = RunConfig()
    tasks = [
        CollectorTask(task_id="collector-0", env=cfg.env, spaces=CARTPOLE, behaviour=EPSILON_GREEDY,
                      collector=cfg.collector, sampling=cfg.sampling, seed=1, policy=None),
        LearnerTask(task_id="learner-0", buffer_id="replay-0", algo=PPOParams(), env=cfg.env, spaces=CARTPOLE,
                    behaviour=SAMPLING, replay=cfg.replay, sampling=cfg.sampling, collector=cfg.collector, seed=2),
        EvaluatorTask(task_id="evaluator-0", env=cfg.env, spaces=CARTPOLE, evaluation=cfg.evaluation, seed=3),
    ]
    for task in tasks:
        resp = ClaimResponse(task=task, directive=Directive(run_state="running"))
        back = ClaimResponse.model_validate_json(resp.model_dump_json())
        assert type(back.task) is type(task)
        assert back.task == task  # the algorithm's parameters survive the wire as their own model
        assert back == resp
    empty = ClaimResponse.model_validate_json('{"task": null, "directive": {"run_state": "solved"}}')
    assert empty.task is None and empty.directive.run_state == "solved"
    with pytest.raises(ValidationError):
        ClaimResponse.model_validate({"task": {"kind": "janitor", "task_id": "x"},
                                      "directive": {"run_state": "running"}})


def test_directive_run_state_is_a_closed_set() -> None:
    with pytest.raises(ValidationError):
        Directive(run_state="paused")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Directive(run_state="running", pause_seconds=-0.1)
