"""Loading another run's checkpoint over HTTP (POST /v1/run/load-checkpoint): a compatible checkpoint is staged and
named to the learner, an incompatible one is refused with 409 and counted, retries change nothing, the source is
confined, and only the admin scope may ask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlfleet.shared.algorithms import REGISTRY
from rlfleet.shared.storage.layout import RunLayout
from tests.support.api import assert_error_body, auth, claim, get_status, make_settings, register, running_client
from tests.support.checkpoints import MANIFEST, TENSORS, write_signed
from tests.support.configs import small_run_config

ALGORITHM = small_run_config().algo.name
OTHER_ALGORITHM = next(name for name in REGISTRY if name != ALGORITHM)


class Loader:
    def __init__(self, client: TestClient, tokens: dict[str, str], data_dir: Path) -> None:
        self.client, self.tokens = client, tokens
        self.run_dir = RunLayout(data_dir, small_run_config().name).run_dir
        self.sources = data_dir / "runs"

    def load(self, source: Path | str, request_id: str = "load-1", checkpoint: str | None = None,
             scope: str = "admin") -> Any:
        body = {"request_id": request_id, "source": str(source), "checkpoint": checkpoint}
        return self.client.post("/v1/run/load-checkpoint", json=body, headers=auth(self.tokens[scope]))

    def control(self) -> dict[str, Any]:
        return get_status(self.client, self.tokens["read"])["control"]

    def learner_directive(self) -> dict[str, Any]:
        worker = register(self.client, self.tokens["learner"], "learner")
        return claim(self.client, self.tokens["learner"], worker)["directive"]

    def metric(self, name: str) -> float:
        text = self.client.get("/metrics").text
        return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(f"{name}_total ")))


@pytest.fixture
def loader(tmp_path: Path) -> Any:
    settings, tokens = make_settings(tmp_path)
    with running_client(settings) as client:
        yield Loader(client, tokens, settings.data_dir)


def test_a_compatible_checkpoint_is_staged_journalled_and_named_to_the_learner(loader: Loader) -> None:
    write_signed(loader.run_dir, 50, ALGORITHM)  # this run's own checkpoint: what the source is compared with
    source = loader.sources / "member-1"
    write_signed(source, 100, ALGORITHM)
    newest = write_signed(source, 200, ALGORITHM, env_steps=4096)
    resp = loader.load(source)
    assert resp.status_code == 200, resp.text
    [load] = resp.json()["loads"]
    assert (load["checkpoint"], load["source_iteration"], load["source_env_steps"]) == (
        "learner-0000000200.pt", 200, 4096)  # the latest by default
    assert resp.json()["reproducible"] is False
    assert (loader.run_dir / "checkpoints" / "loads" / "load-1.pt").read_bytes() == newest
    assert loader.learner_directive()["checkpoint_load"] == {"load_id": "load-1", "path": "loads/load-1.pt"}
    assert loader.metric("rlfleet_checkpoint_loads") == 1
    named = loader.load(source, request_id="load-2", checkpoint="learner-0000000100.pt")
    assert named.json()["loads"][-1]["checkpoint"] == "learner-0000000100.pt"
    assert loader.learner_directive()["checkpoint_load"]["load_id"] == "load-2"  # the latest load is the one
    staged = sorted(p.name for p in (loader.run_dir / "checkpoints" / "loads").iterdir())
    assert staged == ["load-2.pt"]  # the replaced load's copy is gone: only the latest is ever taken up


def test_a_retried_load_changes_nothing(loader: Loader) -> None:
    write_signed(loader.run_dir, 50, ALGORITHM)
    source = loader.sources / "member-1"
    write_signed(source, 100, ALGORITHM)
    first = loader.load(source).json()
    write_signed(source, 300, ALGORITHM)  # a newer checkpoint meanwhile: a retry still does not load it
    again = loader.load(source)
    assert again.status_code == 200 and again.json() == first
    assert len(loader.control()["loads"]) == 1


@pytest.mark.parametrize(("theirs", "hint"), [
    ({"algorithm": OTHER_ALGORITHM}, f"trained by {OTHER_ALGORITHM}, this run trains {ALGORITHM}"),
    ({"manifest": {**MANIFEST, "spaces": {"obs": [8], "act": 4}}}, "its policy's spaces"),
    ({"manifest": {**MANIFEST, "net": {"hidden": [64]}}}, "its policy's net"),
    ({"tensors": {**TENSORS, "model.0.weight": ("float32", (32, 8))}},
     "tensor model.0.weight is float32[32, 8], this run's is float32[32, 4]"),
    ({"tensors": {"model.0.weight": ("float32", (32, 4))}}, "lacks model.0.bias"),
])
def test_an_incompatible_checkpoint_is_refused_named_and_counted(loader: Loader, theirs: dict[str, Any],
                                                                 hint: str) -> None:
    write_signed(loader.run_dir, 50, ALGORITHM)
    source = loader.sources / "member-1"
    write_signed(source, 100, theirs.pop("algorithm", ALGORITHM), **theirs)
    assert_error_body(loader.load(source), 409, "incompatible_checkpoint", hint=hint)
    control = loader.control()
    assert control["load_refusals"] == 1 and control["loads"] == [] and control["reproducible"] is True
    assert loader.metric("rlfleet_checkpoint_load_refusals") == 1
    assert not (loader.run_dir / "checkpoints" / "loads").exists()  # nothing staged
    assert loader.learner_directive()["checkpoint_load"] is None


def test_a_run_without_a_checkpoint_of_its_own_is_asked_for_one_first(loader: Loader) -> None:
    source = loader.sources / "member-1"
    write_signed(source, 100, ALGORITHM)
    assert_error_body(loader.load(source), 409, "conflict", hint="/v1/run/checkpoint")
    assert loader.control()["load_refusals"] == 0  # not an incompatibility: nothing was compared


def test_the_source_is_confined_and_must_exist(loader: Loader, tmp_path: Path) -> None:
    write_signed(loader.run_dir, 50, ALGORITHM)
    outside = tmp_path / "elsewhere" / "runs" / "member-1"
    write_signed(outside, 100, ALGORITHM)
    assert_error_body(loader.load(outside), 422, "invalid", hint="RLFLEET_CHECKPOINT_SOURCES")
    assert_error_body(loader.load(loader.sources / "member-1" / ".." / ".." / ".." / "elsewhere" / "runs" /
                                  "member-1"), 422, "invalid", hint="outside")
    (loader.sources / "linked").symlink_to(outside, target_is_directory=True)  # a link inside pointing out
    assert_error_body(loader.load(loader.sources / "linked"), 422, "invalid", hint="outside")
    assert_error_body(loader.load("runs/member-1"), 422, "invalid", hint="absolute")
    assert_error_body(loader.load(loader.sources / "member-1", checkpoint="../../tokens.json"), 422, "invalid")
    assert_error_body(loader.load(loader.sources / "nobody"), 404, "not_found")
    source = loader.sources / "member-1"
    write_signed(source, 100, ALGORITHM)
    assert_error_body(loader.load(source, checkpoint="learner-0000000999.pt"), 404, "not_found",
                      hint="learner-0000000100.pt")
    assert loader.control()["loads"] == []


def test_only_the_admin_scope_may_load_and_not_after_the_run_ended(loader: Loader) -> None:
    write_signed(loader.run_dir, 50, ALGORITHM)
    source = loader.sources / "member-1"
    write_signed(source, 100, ALGORITHM)
    for scope in ("collector", "learner", "evaluator", "read"):
        assert_error_body(loader.load(source, scope=scope), 403, "forbidden")
    no_token = loader.client.post("/v1/run/load-checkpoint", json={"request_id": "x", "source": str(source)})
    assert_error_body(no_token, 401, "unauthorized")
    assert loader.control()["loads"] == []
    assert loader.client.post("/v1/run/stop", json={"reason": "done"},
                              headers=auth(loader.tokens["admin"])).status_code == 200
    assert_error_body(loader.load(source), 409, "conflict", hint="ended")


def test_loads_survive_a_restart(tmp_path: Path) -> None:
    settings, tokens = make_settings(tmp_path)
    with running_client(settings) as client:
        loader = Loader(client, tokens, settings.data_dir)
        write_signed(loader.run_dir, 50, ALGORITHM)
        write_signed(loader.sources / "member-1", 100, ALGORITHM)
        assert loader.load(loader.sources / "member-1").status_code == 200
        write_signed(loader.sources / "member-2", 100, OTHER_ALGORITHM)
        assert_error_body(loader.load(loader.sources / "member-2", request_id="load-2"), 409,
                          "incompatible_checkpoint")
    with running_client(settings) as client:
        loader = Loader(client, tokens, settings.data_dir)
        assert [load["load_id"] for load in loader.control()["loads"]] == ["load-1"]
        assert loader.control()["load_refusals"] == 1
        assert loader.learner_directive()["checkpoint_load"]["load_id"] == "load-1"
        assert loader.load(loader.sources / "member-1").json()["loads"][0]["load_id"] == "load-1"  # still a retry
