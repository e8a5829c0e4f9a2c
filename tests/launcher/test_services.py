"""The service table on this host: what `rlfleet up` starts, with local paths, loopback addresses and its values
for the settings compose users set through the environment."""

from __future__ import annotations

import sys
from pathlib import Path

from rlfleet.launcher.places import InContainers, OnThisHost
from rlfleet.launcher.services import COMPLETED, STARTED, fleet
from tests.support.repo import REPO


def test_the_table_runs_every_service_locally(tmp_path: Path) -> None:
    data = tmp_path / "data"
    services = {s.name: s for s in fleet(OnThisHost(data, REPO, 4321, {"RLFLEET_OVERRIDES": "seed=4"}))
                if not s.profiles}
    assert set(services) == {"secrets", "coordinator", "collector", "learner", "evaluator"}
    for name in ("coordinator", "collector", "learner", "evaluator"):
        assert services[name].command == [sys.executable, "-m", "rlfleet.launcher", name]
    assert services["secrets"].command[4:] == [
        "--out", str(data / "tokens.json"), *[arg for scope in ("collector", "learner", "evaluator")
                                              for arg in ("--scope-file", f"{scope}={data}/secrets/{scope}/token")]]
    coord = services["coordinator"]
    assert coord.env["RLFLEET_HOST"] == "127.0.0.1"
    assert coord.env["RLFLEET_PORT"] == "4321"
    assert coord.env["RLFLEET_DATA_DIR"] == str(data)
    assert coord.env["RLFLEET_OVERRIDES"] == "seed=4"
    assert coord.env["RLFLEET_CONFIG"] == str(REPO / "configs/cartpole_dqn.yaml")
    assert coord.depends_on == {"secrets": COMPLETED}
    assert coord.healthcheck is not None
    assert coord.healthcheck.test == [sys.executable, "-m", "rlfleet.launcher", "health", "http://127.0.0.1:4321/readyz"]
    assert coord.env["RLFLEET_TOKENS_FILE"] == str(data / "tokens.json")
    assert coord.env["RLFLEET_RUN"] == ""  # unset: the coordinator picks the run (coordinator/runs.py)
    assert coord.env["RLFLEET_DB_SYNCHRONOUS"] == "NORMAL"  # every worker dies with this host: nothing outlives it
    for worker in ("collector", "learner", "evaluator"):
        svc = services[worker]
        assert svc.env["RLFLEET_COORDINATOR_URL"] == "http://127.0.0.1:4321"
        assert svc.env["RLFLEET_TOKEN_FILE"] == f"{data}/secrets/{worker}/token"  # its own scope's token only
        assert "RLFLEET_TOKENS_FILE" not in svc.env
        assert svc.depends_on == {"secrets": COMPLETED, "coordinator": STARTED}
    assert services["collector"].replicas == 2
    assert [s.name for s in services.values() if s.one_shot] == ["secrets"]


def test_local_and_container_tables_differ_only_in_what_a_place_names(tmp_path: Path) -> None:
    """The same services, dependencies, restart policies and replicas wherever they run."""
    local, containers = fleet(OnThisHost(tmp_path, REPO, 1234)), fleet(InContainers())
    assert [(s.name, s.depends_on, s.restart, s.replicas, s.profiles, sorted(s.env)) for s in local] == [
        (s.name, s.depends_on, s.restart, s.replicas, s.profiles, sorted(s.env)) for s in containers]


def test_containers_sync_every_journal_commit() -> None:
    """Compose's workers may outlive the coordinator's node: a commit they acted on must survive its power loss."""
    (coord,) = [s for s in fleet(InContainers()) if s.name == "coordinator"]
    assert coord.env["RLFLEET_DB_SYNCHRONOUS"] == "FULL"


def test_every_dependency_is_a_service_of_the_table(tmp_path: Path) -> None:
    services = fleet(InContainers())
    names = [s.name for s in services]
    for service in services:
        assert set(service.depends_on) <= set(names[:names.index(service.name)])  # declared before: no cycle
