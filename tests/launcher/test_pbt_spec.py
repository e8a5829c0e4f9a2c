"""A PBT spec is checked in full before any member starts (launcher/pbt_spec.py): a misspelt setting with the
close matches, a setting the algorithm cannot change while it trains, ranges outside the setting's bounds."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlfleet.launcher.errors import UserError
from rlfleet.launcher.pbt_spec import Range, load_population
from tests.support.repo import REPO

PPO = REPO / "configs" / "cartpole_ppo.yaml"
SPACE = {"algo.learning_rate": {"low": 1e-4, "high": 3e-3, "log": True}, "algo.clip_range": {"low": 0.1, "high": 0.3}}


def _spec(tmp_path: Path, **changes: Any) -> Path:
    doc = {"name": "pair", "base_config": str(PPO), "population": 2, "interval_env_steps": 4096, "space": SPACE,
           **changes}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _problems(path: Path) -> str:
    with pytest.raises(UserError) as info:
        load_population(path)
    return "\n".join(info.value.lines)


def test_a_valid_spec_loads_and_draws_seeded_settings_inside_the_space(tmp_path: Path) -> None:
    population = load_population(_spec(tmp_path), tmp_path / "out")
    first, again = population.initial_settings(), population.initial_settings()
    assert first == again and len(first) == 2 and first[0] != first[1]
    for settings in first:
        assert 1e-4 <= settings["algo.learning_rate"] <= 3e-3 and 0.1 <= settings["algo.clip_range"] <= 0.3
    assert population.output_dir == (tmp_path / "out").resolve()


def test_the_shipped_lunarlander_population_is_valid() -> None:
    population = load_population(REPO / "configs" / "pbt" / "lunarlander_ppo.yaml")
    assert population.spec.population == 4 and population.base.algo.name == "ppo"


def test_a_misspelt_setting_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    problems = _problems(_spec(tmp_path, space={"algo.learning_rat": {"low": 1e-4, "high": 1e-3}}))
    assert "algo.learning_rat is not a setting" in problems and "did you mean 'algo.learning_rate'" in problems


def test_a_setting_that_is_not_live_is_refused_naming_the_live_ones(tmp_path: Path) -> None:
    problems = _problems(_spec(tmp_path, space={"algo.gamma": {"low": 0.9, "high": 0.99}}))
    assert "algo.gamma cannot change while" in problems and "algo.learning_rate" in problems


def test_a_range_outside_the_settings_bounds_is_refused_naming_the_bound(tmp_path: Path) -> None:
    problems = _problems(_spec(tmp_path, space={"algo.clip_range": {"low": -0.1, "high": 0.3}}))
    assert "algo.clip_range.low = -0.1 is outside the setting's bounds" in problems
    assert "greater than 0" in problems


@pytest.mark.parametrize(("changes", "hint"), [
    ({"space": {"algo.clip_range": {"low": 0.3, "high": 0.1}}}, "above high"),
    ({"space": {"algo.learning_rate": {"low": 0.0, "high": 0.1, "log": True}}}, "log range needs low > 0"),
    ({"population": 1}, "population"),
    ({"quantile": 0.75}, "quantile"),
    ({"test": {"episodes": 15, "num_envs": 10}}, "multiple of num_envs"),
    ({"set": {"algo.clip_range": 0.2}}, "both fixed (set) and perturbed (space)"),
    ({"score": "elo"}, "score"),
    ({"base_config": "no_such_config"}, "base_config"),
])
def test_bad_specs_are_refused_before_anything_starts(tmp_path: Path, changes: dict[str, Any], hint: str) -> None:
    assert hint in _problems(_spec(tmp_path, **changes))
    assert not (tmp_path / "out").exists()


def test_perturbed_values_stay_inside_the_range() -> None:
    bounds = Range(low=0.1, high=0.3)
    assert bounds.fit(0.3 * 1.2) == 0.3 and bounds.fit(0.1 * 0.8) == 0.1
    assert Range(low=1, high=10, integer=True).fit(4.6) == 5.0
    rng = random.Random(0)
    assert all(1e-5 <= Range(low=1e-5, high=1e-2, log=True).draw(rng) <= 1e-2 for _ in range(100))
