"""Beyond one host: every service with a data directory of its own (no shared volume at all), payloads,
policies, checkpoints and the best policy only through an S3-compatible object store (SeaweedFS on loopback).

The run must solve CartPole-v1 (the default DQN config), and the bucket must end clean. "Clean" here: no chunk
object that nothing references (an orphan planted before the run is collected by the live coordinator, and a
sweep after the run finds nothing more to delete), so the chunks left are exactly the final buffer's; beside
them only what a finished run keeps on purpose: the last RLFLEET_KEEP_POLICIES policies, at most 3 learner
checkpoints and best/ (policy and score). The coordinator does not empty its buffer when a run ends, so those
chunks stay until the run's prefix is deleted; the test says how many.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.run import Run
from rlfleet.shared.checkpoint_signature import CHECKPOINT_NAME, signature_name
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.factory import StoreSettings, open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.s3 import S3Store
from rlfleet.shared.tokens import generate_tokens_file
from tests.support.fleet import Fleet
from tests.support.repo import REPO
from tests.support.seaweed import SeaweedFS

RUN = "cartpole-dqn"  # the run the coordinator serves (RLFLEET_RUN): the name in configs/cartpole_dqn.yaml
WORKERS = {"collector-a": "collector", "collector-b": "collector", "learner": "learner", "evaluator": "evaluator"}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def hosts(tmp_path: Path, s3_env: SeaweedFS) -> Iterator[tuple[Fleet, dict[str, str], dict[str, Path]]]:
    seaweedfs = s3_env  # this process (the test, on the coordinator's host) reaches the store too
    bucket = seaweedfs.bucket()
    store_env = {"RLFLEET_STORE_URL": f"s3://{bucket}/fleet", **seaweedfs.env}
    dirs = {name: tmp_path / f"host-{name}" for name in ("coordinator", *WORKERS)}
    for path in dirs.values():
        path.mkdir()
    tokens = generate_tokens_file(dirs["coordinator"] / "tokens.json")
    fleet = Fleet(tmp_path, dirs["coordinator"], REPO / "configs" / "cartpole_dqn.yaml", tokens, {
        **store_env, "RLFLEET_RUN": RUN, "RLFLEET_LEASE_SECONDS": "5", "RLFLEET_ORPHAN_GRACE_SECONDS": "10",
        "RLFLEET_GC_EVERY_SECONDS": "2"})
    try:
        yield fleet, store_env, dirs
    finally:
        fleet.close()


@pytest.mark.slow
def test_services_on_separate_hosts_solve_cartpole_through_the_object_store(
        hosts: tuple[Fleet, dict[str, str], dict[str, Path]], tmp_path: Path) -> None:
    fleet, store_env, dirs = hosts
    target = StoreSettings(store_url=store_env["RLFLEET_STORE_URL"],
                           s3_endpoint_url=store_env["RLFLEET_S3_ENDPOINT_URL"]).store_target()
    layout = RunLayout(dirs["coordinator"], RUN, target)
    payloads, checkpoints, best = (open_store(layout, area) for area in ("store", "checkpoints", "best"))
    assert isinstance(payloads, S3Store)

    started = time.monotonic()
    fleet.start_coordinator()
    orphan = "chunks/collector-9/killed-before-reporting.msgpack"  # as a collector killed after its upload
    payloads.put(orphan, b"never reported")
    for name, kind in WORKERS.items():  # each on its own "host": own data dir, only its own token
        fleet.start(name, kind, {"RLFLEET_COORDINATOR_URL": fleet.url, "RLFLEET_DATA_DIR": str(dirs[name]),
                                 "RLFLEET_TOKEN": fleet.tokens[kind], "RLFLEET_MAX_UNAVAILABLE_SECONDS": "20",
                                 **store_env})
    fleet.wait_for(lambda: fleet.status().run_state == "solved", 600, "the run solved")
    solve_seconds = time.monotonic() - started
    status = fleet.status()
    assert status.confirmed_by is not None and status.confirmed_by.mean >= 475
    print(f"multi-host solve: {status.env_steps} env steps, {solve_seconds:.1f}s from the coordinator's start "
          f"({status.wall_seconds:.1f}s run time), policy v{status.policy_version}")
    for name in WORKERS:
        assert fleet.procs[name].wait(timeout=60) == 0, fleet.logs()

    # The live coordinator's GC collected the orphan; nothing reached any worker's disk.
    fleet.wait_for(lambda: payloads.size(orphan) is None, 30, "the orphan collected")
    for name in WORKERS:
        assert _files(dirs[name]) == [], name
    run_dir = dirs["coordinator"] / "runs" / RUN
    assert not any((run_dir / area).exists() for area in ("store", "checkpoints", "best"))

    # What the bucket holds once the coordinator is gone: its journal decides what is referenced.
    fleet.http.post("/v1/run/stop", json={"reason": "test over"})
    fleet.close()
    run = Run(RunConfig(), payloads, journal=Journal(run_dir / "coordinator.sqlite"))
    try:
        referenced = run.housekeeping.referenced_payloads()
        assert run.ctx.payloads.collect_garbage(referenced, grace_seconds=0) == 0  # nothing left over
        referenced = {e.payload_path for e in run.ctx.data.buffer.entries()}
        kept_policies = {p.path for p in run.ctx.policies.versions}
    finally:
        run.ctx.close()
        run.ctx.journal.close()
    assert set(payloads.list_prefix("chunks")) == referenced
    assert set(payloads.list_prefix("policies")) == kept_policies and len(kept_policies) <= 8
    kept = [name for name in checkpoints.list_prefix("") if CHECKPOINT_NAME.match(name)]
    assert 1 <= len(kept) <= 3  # each beside its signature, and nothing else
    assert sorted(checkpoints.list_prefix("")) == sorted([*kept, *(signature_name(name) for name in kept)])
    assert best.list_prefix("") == ["policy.safetensors", "score.json"]
    everything = _all_keys(payloads)
    assert everything == ({f"fleet/runs/{RUN}/store/{p}" for p in referenced | kept_policies}
                          | {f"fleet/runs/{RUN}/checkpoints/{p}" for p in checkpoints.list_prefix("")}
                          | {f"fleet/runs/{RUN}/best/{p}" for p in ("policy.safetensors", "score.json")})
    print(f"bucket after the run: {len(referenced)} chunks the final buffer references, {len(kept_policies)} "
          f"policies, {len(kept)} checkpoints with their signatures, best/ (2 objects); {len(everything)} keys")

    # `rlfleet test` on the coordinator's host reads the best policy from the object store.
    done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", "test", str(run_dir), "--episodes", "10",
                           "--num-envs", "10", "--json", str(tmp_path / "test.json")],
                          env={**_plain_env(), **store_env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"s3://{payloads.bucket}/fleet/runs/{RUN}/best" in done.stdout


def _all_keys(store: S3Store) -> set[str]:
    pages = store.client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket)
    return {obj["Key"] for page in pages for obj in page.get("Contents", [])}


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("RLFLEET_", "AWS_"))}
