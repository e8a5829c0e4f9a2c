"""A coordinator whose journal rolled back a publish: its collectors re-sync to its latest policy.

A node crash under a journal on synchronous=NORMAL can lose the newest commits, a policy publish among them,
while collectors elsewhere already act with that version. Simulated here with real processes: a collector acts
with v2; the coordinator is killed and comes back from a copy of its journal taken when v1 was the latest (the
collector's registration and task in it). The collector's chunks made with v2 are refused ("never published");
it must act with v1 again and have its chunks acknowledged, instead of having every chunk refused forever."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.policy.files import save_policy
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import ClaimResponse, PolicyRef, RegisterResponse
from tests.support.configs import make_config, small_run_config
from tests.support.fleet import Fleet
from tests.support.policies import manifest, policy_state

RUN = make_config(small_run_config(), replay={"tolerance_transitions": 10**9})  # no learner samples: never pause


@pytest.fixture
def run_config() -> RunConfig:
    return RUN


@pytest.fixture
def fleet(tmp_path: Path, data_dir: Path, config_file: Path, tokens: dict[str, str]) -> Iterator[Fleet]:
    f = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_LEASE_SECONDS": "6", "RLFLEET_RUN": RUN.name})
    try:
        yield f
    finally:
        f.close()


class Publisher:
    """The learner's side of publishing, over HTTP: a registered learner holding the learner task. Inside its
    `with` it renews its lease every second, as a learner does: the lease is 6 s here, and on a loaded machine the
    collector's start (the wait between the two publishes) took longer than that, which lost the registration."""

    def __init__(self, fleet: Fleet, tokens: dict[str, str], store: LocalStore) -> None:
        self.fleet, self.store = fleet, store
        self.headers = {"Authorization": f"Bearer {tokens['learner']}"}
        resp = fleet.http.post("/v1/workers", json={"kind": "learner", "name": "publisher"}, headers=self.headers)
        self.worker_id = RegisterResponse.model_validate_json(resp.content).worker_id
        resp = fleet.http.post(f"/v1/workers/{self.worker_id}/claim", headers=self.headers)
        assert ClaimResponse.model_validate_json(resp.content).task is not None, resp.text
        plan = RunPlan.of(RUN)
        self.manifest = manifest(plan.spaces, plan.behaviour.head, RUN.algo.net.hidden)
        self._done = threading.Event()
        self._renewals = threading.Thread(target=self._renew, name="lease", daemon=True)
        self._lost: httpx.HTTPError | None = None

    def __enter__(self) -> Publisher:
        self._renewals.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._renewals.join()
        if self._lost is not None:
            raise AssertionError(f"the publisher's lease was not renewed: {self._lost}")

    def _renew(self) -> None:
        with httpx.Client(base_url=self.fleet.url, timeout=5, headers=self.headers) as http:
            while not self._done.wait(1.0):
                try:
                    http.post(f"/v1/workers/{self.worker_id}/heartbeat").raise_for_status()
                except httpx.HTTPError as exc:
                    self._lost = exc
                    return

    def publish(self, version: int) -> PolicyRef:
        state = {k: torch.from_numpy(v) for k, v in policy_state(self.manifest, version).items()}
        ref = save_policy(self.store, version, state, self.manifest)
        resp = self.fleet.http.post("/v1/policies", headers=self.headers, json={
            "worker_id": self.worker_id, "policy": ref.model_dump(mode="json"), "iteration": version})
        assert resp.status_code == 200, resp.text
        return ref


def snapshot(journal: Path, to: Path) -> None:
    """A consistent copy of the live journal's committed state (SQLite's online backup)."""
    live, copy = sqlite3.connect(journal), sqlite3.connect(to)
    try:
        live.backup(copy)
    finally:
        live.close()
        copy.close()


def restore(journal: Path, copy: Path) -> None:
    """The journal as the node's disk had it before the lost commits: the copy, no WAL beside it."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{journal}{suffix}").unlink(missing_ok=True)
    journal.write_bytes(copy.read_bytes())


def test_a_collector_ahead_of_a_rolled_back_coordinator_re_syncs_to_its_latest(
        fleet: Fleet, tokens: dict[str, str], data_dir: Path, tmp_path: Path) -> None:
    layout = RunLayout(data_dir, RUN.name)
    fleet.start_coordinator()
    log = tmp_path / "collector.log"
    with Publisher(fleet, tokens, LocalStore(layout.run_dir / "store")) as publisher:
        publisher.publish(1)
        fleet.start_worker("collector", "collector")
        fleet.wait_for(lambda: fleet.status().chunks >= 2, 60, "the collector's first chunks with v1")
        snapshot(layout.journal, tmp_path / "at-v1.sqlite")  # the collector's registration and task are in it
        publisher.publish(2)
    fleet.wait_for(lambda: "acting with policy v2" in log.read_text(), 30, "the collector acting with v2")
    fleet.kill("coordinator")  # its node crashed: the publish of v2 is lost with the journal's last commits
    restore(layout.journal, tmp_path / "at-v1.sqlite")
    fleet.start_coordinator()
    after = fleet.status()
    assert after.policy_version == 1 and any(w.kind == "collector" for w in after.workers)

    fleet.wait_for(lambda: fleet.status().chunks > after.chunks, 45,
                   "chunks acknowledged after the rollback (all refused as made with v2, never published)")
    text = log.read_text()
    assert "refuses chunks made with it; acting with v1" in text
    assert text.count("acting with policy v1") == 2  # at the start, and again after the rollback
    final = fleet.status()
    assert final.policy_version == 1 and final.duplicate_chunks == 0
