"""docker-compose.yml -> local processes: the translation rules `rlfleet up` relies on."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from launcher.compose import Translation, interpolate, load_services
from tests.support.repo import REPO


def test_interpolate_follows_compose_defaults() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d}", env) == "x"
    assert interpolate("${EMPTY:-d}", env) == "d"
    assert interpolate("${MISSING:-d}", env) == "d"
    assert interpolate("${MISSING}", env) == ""
    assert interpolate("a-${SET}-b", env) == "a-x-b"


def test_translation_maps_mounts_only_as_path_prefixes(tmp_path: Path) -> None:
    tr = Translation.for_host(tmp_path / "d", tmp_path / "r", 1234)
    assert tr.apply("/data/tokens.json", {}) == f"{tmp_path}/d/tokens.json"
    assert tr.apply("/data", {}) == f"{tmp_path}/d"
    assert tr.apply("/database", {}) == "/database"
    assert tr.apply("/app/configs/x.yaml", {}) == f"{tmp_path}/r/configs/x.yaml"
    assert tr.apply("http://coordinator:8000", {}) == "http://127.0.0.1:1234"
    assert tr.apply("http://127.0.0.1:8000/readyz", {}) == "http://127.0.0.1:1234/readyz"
    assert tr.apply("0.0.0.0", {}) == "127.0.0.1"
    assert tr.apply("/secrets/all/tokens.json", {}) == f"{tmp_path}/d/tokens.json"
    assert tr.apply("/secrets/learner/token", {}) == f"{tmp_path}/d/secrets/learner/token"
    assert tr.apply("learner=/secrets/learner/token", {}) == f"learner={tmp_path}/d/secrets/learner/token"
    assert tr.apply("a=/database", {}) == "a=/database"


def test_a_translated_path_is_not_translated_again(tmp_path: Path) -> None:
    tr = Translation.for_host(Path("/app/data"), tmp_path / "r", 1234)
    assert tr.apply("/data/x", {}) == "/app/data/x"  # not then mapped as /app/... into the repository


def test_repo_compose_file_translates_to_local_services(tmp_path: Path) -> None:
    data = tmp_path / "data"
    services = load_services(REPO / "docker-compose.yml", {"RLFLEET_OVERRIDES": "seed=4"}, data, REPO, 4321)
    assert set(services) == {"secrets", "coordinator", "collector", "learner", "evaluator"}
    for name in ("coordinator", "collector", "learner", "evaluator"):
        assert services[name].argv == [sys.executable, "-m", "launcher", name]
    assert services["secrets"].argv[4:] == [
        "--out", str(data / "tokens.json"), *[arg for scope in ("collector", "learner", "evaluator")
                                              for arg in ("--scope-file", f"{scope}={data}/secrets/{scope}/token")]]
    coord = services["coordinator"]
    assert coord.env["RLFLEET_HOST"] == "127.0.0.1"
    assert coord.env["RLFLEET_PORT"] == "4321"
    assert coord.env["RLFLEET_DATA_DIR"] == str(data)
    assert coord.env["RLFLEET_OVERRIDES"] == "seed=4"
    assert coord.env["RLFLEET_CONFIG"] == str(REPO / "configs/cartpole_dqn.yaml")
    assert coord.depends_on == {"secrets": "service_completed_successfully"}
    assert coord.healthcheck == [sys.executable, "-m", "launcher", "health", "http://127.0.0.1:4321/readyz"]
    assert coord.env["RLFLEET_TOKENS_FILE"] == str(data / "tokens.json")
    assert coord.env["RLFLEET_RUN"] == ""  # unset: the coordinator picks the run (coordinator/runs.py)
    for worker in ("collector", "learner", "evaluator"):
        svc = services[worker]
        assert svc.env["RLFLEET_COORDINATOR_URL"] == "http://127.0.0.1:4321"
        assert svc.env["RLFLEET_TOKEN_FILE"] == f"{data}/secrets/{worker}/token"  # its own scope's token only
        assert "RLFLEET_TOKENS_FILE" not in svc.env
        assert svc.depends_on == {"secrets": "service_completed_successfully", "coordinator": "service_started"}
    assert services["collector"].replicas == 2


def test_each_compose_service_mounts_only_its_own_token() -> None:
    """The full tokens file (admin included) lives in a volume that only `secrets` and the coordinator mount."""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    mounts = {name: {v.split(":")[0] for v in spec.get("volumes", [])} for name, spec in services.items()}
    assert mounts["secrets"] == {"tokens", "collector-token", "learner-token", "evaluator-token"}
    assert mounts["coordinator"] == {"rlfleet-data", "tokens"}
    for worker in ("collector", "learner", "evaluator"):
        assert mounts[worker] == {"rlfleet-data", f"{worker}-token"}


def test_host_network_override_puts_every_service_on_the_host() -> None:
    """docker/e2e.sh's override: no Docker network at all, so all traffic stays on 127.0.0.1."""
    override = yaml.safe_load((REPO / "docker/compose.hostnet.yml").read_text())["services"]
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert set(override) == set(services)
    assert all(spec["network_mode"] == "host" for spec in override.values())
