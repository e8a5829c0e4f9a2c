"""A sweep spec is checked against the run config it tunes before any trial starts: a setting that does not exist
(with the close matches), a range beyond a setting's bounds (naming the bound), a type the setting does not take,
a corner of the space the config refuses; each refused with exit 2 and nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlfleet.launcher.errors import UserError
from rlfleet.launcher.spec_files import override
from rlfleet.launcher.sweep_spec import load_sweep
from tests.support.cli import one_line_exit_2, rlfleet
from tests.support.repo import REPO

BASE = str(REPO / "configs" / "cartpole_dqn.yaml")


def spec(tmp_path: Path, **fields: object) -> Path:
    body: dict[str, object] = {"base_config": BASE, "study": "s", "trials": 2, "objective": {"kind": "test"},
                               "output_dir": str(tmp_path / "out"),
                               "space": {"algo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2,
                                                                "log": True}}}
    body.update(fields)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def refusal(path: Path) -> list[str]:
    with pytest.raises(UserError) as caught:
        load_sweep(path)
    return caught.value.lines


def test_the_shipped_spec_loads_with_its_base_config_beside_it() -> None:
    sweep = load_sweep(REPO / "configs" / "sweeps" / "cartpole_dqn.yaml")
    assert sweep.base_path.resolve() == (REPO / "configs" / "cartpole_dqn.yaml").resolve()
    assert sweep.spec.direction == "maximize"
    assert set(sweep.spec.space) == {"algo.learning_rate", "algo.target_update_every"}
    assert sweep.storage == f"sqlite:///{sweep.output_dir / 'study.db'}"


def test_an_unknown_setting_is_refused_with_the_close_match(tmp_path: Path) -> None:
    lines = refusal(spec(tmp_path, space={"algo.target_update_interval": {"type": "int", "low": 10, "high": 100}}))
    assert len(lines) == 1
    assert "algo.target_update_interval: no such setting" in lines[0]
    assert "did you mean 'algo.target_update_every'" in lines[0]


def test_a_misspelt_section_is_refused_with_the_setting_meant(tmp_path: Path) -> None:
    (line,) = refusal(spec(tmp_path, space={"alg.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3}}))
    assert "did you mean 'algo.learning_rate'" in line


@pytest.mark.parametrize(("key", "low", "high", "bound"), [
    ("algo.learning_rate", 0.0, 0.01, "algo.learning_rate > 0"),
    ("algo.batch_size", 32, 8192, "algo.batch_size <= 4096"),
    ("algo.target_update_every", 0, 100, "algo.target_update_every >= 1"),
])
def test_a_range_outside_the_settings_bounds_is_refused_naming_the_bound(tmp_path: Path, key: str, low: float,
                                                                         high: float, bound: str) -> None:
    kind = "float" if isinstance(low, float) else "int"
    (line,) = refusal(spec(tmp_path, space={key: {"type": kind, "low": low, "high": high}}))
    assert f"outside the setting's bound ({bound})" in line, line


def test_a_float_range_over_an_integer_setting_is_refused(tmp_path: Path) -> None:
    (line,) = refusal(spec(tmp_path, space={"algo.batch_size": {"type": "float", "low": 16.0, "high": 64.0}}))
    assert "algo.batch_size is an integer setting, not a float: use type: int" in line


def test_a_numeric_range_over_a_setting_that_is_no_number_is_refused(tmp_path: Path) -> None:
    (line,) = refusal(spec(tmp_path, space={"env.id": {"type": "int", "low": 1, "high": 2}}))
    assert "env.id is a str setting, not a number: use type: categorical" in line


@pytest.mark.parametrize(("fields", "expected"), [
    ({"trials": 0}, "trials: Input should be greater than or equal to 1"),
    ({"objective": {"kind": "validation"}}, "objective: Input tag 'validation' found using 'kind' does not match"),
    ({"space": {"algo.learning_rate": {"type": "float", "low": 0.1, "high": 0.01}}}, "low (0.1) is above high"),
    ({"space": {"algo.learning_rate": {"type": "float", "low": 0.0, "high": 0.01, "log": True}}},
     "a log range needs low > 0"),
    ({"space": {"algo.net.hidden": {"type": "categorical", "choices": [[64, 64], [256, 256]]}}},
     "choice [64, 64] is a list: categorical choices are numbers, strings, booleans or null"),
    ({"trails": 3}, "trails: unknown key"),
])
def test_bad_types_and_values_in_the_spec_are_refused(tmp_path: Path, fields: dict, expected: str) -> None:
    lines = refusal(spec(tmp_path, **fields))
    assert any(expected in line for line in lines), lines


def test_a_corner_of_the_space_the_config_refuses_is_named(tmp_path: Path) -> None:
    """Each setting's own bounds allow it, but a buffer of 1,000 cannot hold one chunk of 8 envs x 256 steps."""
    lines = refusal(spec(tmp_path, space={"replay.capacity_transitions": {"type": "int", "low": 1000,
                                                                          "high": 100_000}}))
    assert any("does not load with replay.capacity_transitions=1000" in line and "does not fit" in line
               for line in lines), lines
    assert not any("=100000" in line for line in lines)


def test_a_setting_both_fixed_and_searched_is_refused(tmp_path: Path) -> None:
    lines = refusal(spec(tmp_path, set={"algo.learning_rate": 0.001}))
    assert any("algo.learning_rate is both fixed (set) and searched (space)" in line for line in lines), lines


def test_a_fixed_setting_the_config_refuses_is_named_with_the_spec(tmp_path: Path) -> None:
    (line,) = refusal(spec(tmp_path, set={"budget.max_env_steps": 0}))
    assert line.startswith(f"{tmp_path / 'sweep.yaml'}: base_config with set: ") and "budget.max_env_steps" in line


def test_overrides_round_trip_through_set() -> None:
    assert override("algo.learning_rate", 1e-05) == "algo.learning_rate=1.0e-05"
    assert override("env.id", "CartPole-v1") == "env.id=CartPole-v1"
    assert override("algo.double_q", False) == "algo.double_q=false"


def test_the_command_refuses_a_bad_spec_before_any_trial_starts(tmp_path: Path) -> None:
    path = spec(tmp_path, space={"algo.target_update_interval": {"type": "int", "low": 10, "high": 100}})
    (line,) = one_line_exit_2(rlfleet("sweep", str(path), cwd=tmp_path))
    assert line.startswith(f"rlfleet sweep: {path}: space: algo.target_update_interval: no such setting")
    assert not (tmp_path / "out").exists()
