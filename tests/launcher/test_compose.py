"""docker-compose.yml -> local processes: the translation rules `rlfleet up` relies on."""

from __future__ import annotations

import sys
from pathlib import Path

from launcher.compose import Translation, interpolate, load_services
from tests.conftest import REPO


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


def test_repo_compose_file_translates_to_local_services(tmp_path: Path) -> None:
    data = tmp_path / "data"
    services = load_services(REPO / "docker-compose.yml", {"RLFLEET_OVERRIDES": "seed=4"}, data, REPO, 4321)
    assert set(services) == {"secrets", "coordinator", "collector", "learner", "evaluator"}
    for name in ("coordinator", "collector", "learner", "evaluator"):
        assert services[name].argv == [sys.executable, "-m", "launcher", name]
    assert services["secrets"].argv[-2:] == ["--out", str(data / "tokens.json")]
    coord = services["coordinator"]
    assert coord.env["RLFLEET_HOST"] == "127.0.0.1"
    assert coord.env["RLFLEET_PORT"] == "4321"
    assert coord.env["RLFLEET_DATA_DIR"] == str(data)
    assert coord.env["RLFLEET_OVERRIDES"] == "seed=4"
    assert coord.env["RLFLEET_CONFIG"] == str(REPO / "configs/cartpole_dqn.yaml")
    assert coord.depends_on == {"secrets": "service_completed_successfully"}
    assert coord.healthcheck == [sys.executable, "-m", "launcher", "health", "http://127.0.0.1:4321/readyz"]
    for worker in ("collector", "learner", "evaluator"):
        svc = services[worker]
        assert svc.env["RLFLEET_COORDINATOR_URL"] == "http://127.0.0.1:4321"
        assert svc.env["RLFLEET_TOKENS_FILE"] == str(data / "tokens.json")
        assert svc.depends_on == {"secrets": "service_completed_successfully", "coordinator": "service_started"}
    assert services["collector"].replicas == 2
