"""launcher.configs: `--config` names a packaged config or a file; a bare name that matches nothing is refused with
the close names and the list of packaged configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlfleet.launcher.configs import PACKAGED, UnknownConfig, packaged, resolve_config
from tests.support.repo import REPO


def test_the_packaged_configs_are_the_repositorys_configs_by_dashed_name() -> None:
    assert PACKAGED.resolve() == (REPO / "configs").resolve()
    configs = packaged()
    assert configs["cartpole-dqn"].name == "cartpole_dqn.yaml" and "pong-ppo" in configs
    assert set(configs) == {p.stem.replace("_", "-") for p in (REPO / "configs").glob("*.yaml")}


@pytest.mark.parametrize("name", ["cartpole-dqn", "cartpole_dqn"])
def test_a_name_resolves_to_its_packaged_file_from_any_directory(name: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_config(name) == PACKAGED / "cartpole_dqn.yaml"


def test_a_file_wins_over_a_packaged_name_and_paths_stay_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("cartpole-dqn").write_text("name: mine\n")
    assert resolve_config("cartpole-dqn") == Path("cartpole-dqn")
    assert resolve_config("./missing.yaml") == Path("missing.yaml")  # the loader names the missing file
    assert resolve_config("sub/dir/x") == Path("sub/dir/x")


def test_an_unknown_name_is_refused_with_close_names_and_the_list() -> None:
    with pytest.raises(UnknownConfig) as info:
        resolve_config("cartpole-dqm")
    message = str(info.value)
    assert message.startswith("--config cartpole-dqm: no such file") and "did you mean 'cartpole-dqn'" in message
    assert "pong-ppo" in message
