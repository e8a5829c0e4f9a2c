"""docker-compose.yml is the service table rendered for containers: committed as generated, and what compose reads
from it is the table's (services, commands, mounts, settings as `${VAR:-default}`)."""

from __future__ import annotations

import yaml

from rlfleet.launcher.compose_file import render
from rlfleet.launcher.places import InContainers
from rlfleet.launcher.services import fleet
from tests.support.repo import REPO


def test_the_committed_file_is_the_generated_one() -> None:
    committed = (REPO / "docker-compose.yml").read_text()
    assert committed == render(), ("docker-compose.yml differs from the service table (launcher/services.py): "
                                   "run `python -m rlfleet.launcher.compose_file > docker-compose.yml` and commit it")


def test_compose_reads_the_tables_services_commands_and_settings() -> None:
    doc = yaml.safe_load(render())
    table = {service.name: service for service in fleet(InContainers())}
    assert list(doc["services"]) == list(table)
    for name, spec in doc["services"].items():
        assert spec["command"] == table[name].command
        assert spec.get("environment", {}) == table[name].env
    coordinator = doc["services"]["coordinator"]
    assert coordinator["environment"]["RLFLEET_CONFIG"] == "${RLFLEET_CONFIG:-/app/configs/cartpole_dqn.yaml}"
    assert coordinator["ports"] == ["127.0.0.1:${RLFLEET_PORT:-8000}:8000"]
    assert coordinator["healthcheck"]["test"] == ["CMD", "rlfleet", "health", "http://127.0.0.1:8000/readyz"]
    assert doc["services"]["collector"]["deploy"] == {"replicas": 2}
    assert doc["services"]["learner"]["deploy"] == {"replicas": "${RLFLEET_LEARNERS:-1}"}
    assert "restart" not in doc["services"]["secrets"]  # a one-shot job: compose must not restart it
    assert "#   RLFLEET_LEARNERS=1  (learner replicas)" in render()  # the header lists every user setting


def test_each_compose_service_mounts_only_its_own_token() -> None:
    """The full tokens file (admin included) lives in a volume that only `secrets` and the coordinator mount."""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    mounts = {name: {v.split(":")[0] for v in spec.get("volumes", [])} for name, spec in services.items()}
    assert mounts["secrets"] == {"tokens", "collector-token", "learner-token", "evaluator-token"}
    assert mounts["coordinator"] == {"rlfleet-data", "tokens"}
    for worker in ("collector", "learner", "evaluator"):
        assert mounts[worker] == {"rlfleet-data", f"{worker}-token"}


def test_only_the_learners_and_the_coordinator_share_the_learners_network() -> None:
    """A learner group's rendezvous store is unauthenticated and unpickles what it reads: learners are on the
    `learners` network alone, which only the coordinator (which they call) joins besides them; every other service
    stays on `default`, from which no learner address is reachable."""
    doc = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert set(doc["networks"]) == {"learners"}
    joined = {name: spec.get("networks", ["default"]) for name, spec in doc["services"].items()
              if "network_mode" not in spec}
    assert joined.pop("learner") == ["learners"]
    assert joined.pop("coordinator") == ["default", "learners"]
    assert all(networks == ["default"] for networks in joined.values()), joined


def test_host_network_override_puts_every_service_on_the_host() -> None:
    """docker/e2e.sh's override: no Docker network at all, so all traffic stays on 127.0.0.1."""
    override = yaml.safe_load((REPO / "docker/compose.hostnet.yml").read_text())["services"]
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert set(override) == set(services)
    assert all(spec["network_mode"] == "host" for spec in override.values())


def test_the_s3_overlay_names_only_services_of_the_table() -> None:
    overlay = yaml.safe_load((REPO / "docker/compose.s3.yml").read_text())["services"]
    assert set(overlay) <= {service.name for service in fleet(InContainers())}
