"""The coordinator with its payloads in an object store (a real SeaweedFS on loopback): size checks through the
store, nothing acknowledged while the store does not answer, and a GC sweep that deletes only what nothing
references."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlfleet.coordinator.run import Run
from rlfleet.launcher.up import free_port
from rlfleet.shared.storage.factory import StoreConfigError, open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.s3 import S3Store
from tests.support.api import auth, claim, get_status, make_settings, register, running_client
from tests.support.chunks import write_chunk
from tests.support.configs import small_run_config
from tests.support.seaweed import SeaweedFS


def test_chunks_are_sized_in_the_object_store_and_never_acknowledged_while_it_is_down(
        tmp_path: Path, s3_env: SeaweedFS) -> None:
    settings, tokens = make_settings(tmp_path, store_url=f"s3://{s3_env.shared_bucket}/coordinator-test",
                                     s3_endpoint_url=s3_env.endpoint)
    with running_client(settings) as client:
        run: Run = client.app.state.run  # type: ignore[attr-defined]
        assert isinstance(run.ctx.store, S3Store) and not run.ctx.store.local  # sizes are asked in a thread
        token = tokens["collector"]
        worker = register(client, token, "collector")
        task = claim(client, token, worker)["task"]["task_id"]

        report = write_chunk(run.ctx.store, task, "a" * 32, worker)
        resp = client.post("/v1/chunks", json=report, headers=auth(token))
        assert resp.status_code == 200, resp.text

        missing = write_chunk(run.ctx.store, task, "b" * 32, worker)
        run.ctx.store.delete(missing["payload_path"])  # reported but never uploaded: refused, as with files
        resp = client.post("/v1/chunks", json=missing, headers=auth(token))
        assert resp.status_code == 422 and "not in the store" in resp.json()["message"]

        # The store stops answering: the report is refused with 503 (workers retry it), nothing is counted.
        up = run.ctx.store
        run.ctx.store = S3Store(up.bucket, up.prefix, f"http://127.0.0.1:{free_port()}", retry_seconds=0.2)
        later = write_chunk(up, task, "c" * 32, worker)
        resp = client.post("/v1/chunks", json=later, headers=auth(token))
        assert resp.status_code == 503 and resp.json()["error"] == "store_unavailable", resp.text
        resp = client.post("/v1/chunk-batches", json={"reports": [later]}, headers=auth(token))
        assert resp.status_code == 503 and resp.json()["error"] == "store_unavailable", resp.text
        assert get_status(client, tokens["read"])["chunks"] == 1
        run.ctx.store = up  # back: the retried report is acknowledged, once
        resp = client.post("/v1/chunks", json=later, headers=auth(token))
        assert resp.status_code == 200 and not resp.json()["duplicate"]
        assert get_status(client, tokens["read"])["chunks"] == 2

        # GC: an unreported object goes once past its grace; referenced ones and other prefixes stay.
        orphan = write_chunk(up, task, "d" * 32, worker)["payload_path"]
        elsewhere = S3Store(up.bucket, "someone-else", s3_env.endpoint)
        elsewhere.put("chunks/x/y.msgpack", b"not ours")
        assert run.ctx.payloads.collect_garbage(run.housekeeping.referenced_payloads(), grace_seconds=3600) == 0
        time.sleep(1.1)  # LastModified has one-second resolution
        assert run.ctx.payloads.collect_garbage(run.housekeeping.referenced_payloads(), grace_seconds=0) == 1
        assert orphan not in up.list_prefix("chunks")
        assert sorted(up.list_prefix("chunks")) == sorted([report["payload_path"], later["payload_path"]])
        assert elsewhere.list_prefix("chunks") == ["chunks/x/y.msgpack"]


def test_the_coordinator_refuses_an_s3_url_without_an_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlfleet.coordinator.main import create_app

    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    settings, _ = make_settings(tmp_path, store_url="s3://rl-bucket/p")
    with pytest.raises(StoreConfigError, match="RLFLEET_S3_ENDPOINT_URL"):
        create_app(settings)


def test_published_policies_and_their_deletion_go_through_the_object_store(
        tmp_path: Path, s3_env: SeaweedFS) -> None:
    """The policy book keeps RLFLEET_KEEP_POLICIES versions: older policy objects are deleted from the bucket."""
    settings, tokens = make_settings(tmp_path, store_url=f"s3://{s3_env.shared_bucket}/policy-test",
                                     s3_endpoint_url=s3_env.endpoint, keep_policies=2)
    layout = RunLayout(settings.data_dir, small_run_config().name, settings.store_target())
    store = open_store(layout, "store")
    with running_client(settings) as client:
        token = tokens["learner"]
        learner = register(client, token, "learner")
        claim(client, token, learner)
        for version in (1, 2, 3):
            path = f"policies/v{version:08d}.safetensors"
            sha = store.put(path, f"policy {version}".encode())
            resp = client.post("/v1/policies", headers=auth(token), json={
                "worker_id": learner, "iteration": version, "policy": {"version": version, "path": path,
                                                                       "sha256": sha}})
            assert resp.status_code == 200, resp.text
        client.app.state.run.ctx.flush()  # type: ignore[attr-defined]
    assert store.list_prefix("policies") == ["policies/v00000002.safetensors", "policies/v00000003.safetensors"]
