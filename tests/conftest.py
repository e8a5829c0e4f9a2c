"""Fixtures shared by the whole suite: a small run config, tokens, a store, and an in-process coordinator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.tokens import generate_tokens_file
from tests.support.configs import small_run_config
from tests.support.seaweed import SeaweedFS


@pytest.fixture
def run_config() -> RunConfig:
    return small_run_config()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def tokens(data_dir: Path) -> dict[str, str]:
    return generate_tokens_file(data_dir / "tokens.json")


@pytest.fixture
def config_file(tmp_path: Path, run_config: RunConfig) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(dump_run_config(run_config))
    return path


@pytest.fixture
def coordinator_settings(config_file: Path, data_dir: Path, tokens: dict[str, str],
                         run_config: RunConfig) -> CoordinatorSettings:
    # Named explicitly (as `rlfleet up` names its runs), so the run's files are at runs/test-run/.
    return CoordinatorSettings(config=config_file, run=run_config.name, data_dir=data_dir,
                               tokens_file=data_dir / "tokens.json", sample_wait_seconds=0.05, tick_seconds=0.2,
                               gc_pacing=False)


@pytest.fixture
def client(coordinator_settings: CoordinatorSettings) -> Iterator[TestClient]:
    """The real app (lifespan included) behind Starlette's in-process test client."""
    with TestClient(create_app(coordinator_settings), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def store(data_dir: Path, run_config: RunConfig) -> LocalStore:
    """The payload store of the coordinator fixture's run."""
    return LocalStore(data_dir / "runs" / run_config.name / "store")


@pytest.fixture
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries of the worker client without jitter: each waits its shortest backoff, so tests of retries are quick
    and their timing fixed."""
    monkeypatch.setattr("rlfleet.shared.worker.client.random.random", lambda: 0.0)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One real S3-compatible server (SeaweedFS on loopback, free ports) for the whole session; tests take
    a fresh bucket each (`seaweedfs.bucket()`)."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch) -> SeaweedFS:
    """This process's environment pointed at `seaweedfs` (endpoint and credentials), as a service's would be."""
    monkeypatch.delenv("AWS_SHARED_CREDENTIALS_FILE", raising=False)
    for name, value in seaweedfs.env.items():
        monkeypatch.setenv(name, value)
    return seaweedfs
