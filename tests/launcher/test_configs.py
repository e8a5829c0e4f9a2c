"""launcher.configs: `--config` names a shipped config or a file, from any directory; the shipped configs are the
repository's configs/ (package data in a wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlfleet.launcher.configs import CONFIGS, config_file, shipped_configs
from rlfleet.launcher.errors import UserError
from tests.support.repo import REPO


def test_the_shipped_configs_are_the_repositorys_configs_by_dashed_name() -> None:
    assert CONFIGS.resolve() == (REPO / "configs").resolve()
    configs = shipped_configs()
    assert configs["cartpole-dqn"].name == "cartpole_dqn.yaml" and "pong-ppo" in configs
    assert set(configs) == {p.stem.replace("_", "-") for p in (REPO / "configs").glob("*.yaml")}


@pytest.mark.parametrize("name", ["cartpole-dqn", "cartpole_dqn"])
def test_a_name_resolves_to_its_shipped_file_from_any_directory(name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert config_file(name) == CONFIGS / "cartpole_dqn.yaml"


def test_a_file_wins_over_a_shipped_name_and_paths_stay_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("cartpole-dqn").write_text("name: mine\n")
    assert config_file("cartpole-dqn") == Path("cartpole-dqn")
    assert config_file("./missing.yaml") == Path("missing.yaml")  # whoever reads it names the missing file
    assert config_file("sub/dir/x") == Path("sub/dir/x")


def test_an_unknown_name_is_refused_with_close_names_and_the_list() -> None:
    with pytest.raises(UserError) as info:
        config_file("cartpole-dqm")
    (line,) = info.value.lines
    assert line.startswith("--config cartpole-dqm: no config of that name") and "'cartpole-dqn'" in line
    assert "pong-ppo" in line
