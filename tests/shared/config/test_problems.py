"""A config's validation errors as one line per problem: field, value, and the close key names for a typo, found
through nested sections, tagged unions (algo, wrappers) and lists."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlfleet.shared.config.problems import config_problems, known_keys
from rlfleet.shared.config.run_config import RunConfig


def problems(raw: dict) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        RunConfig.model_validate(raw)
    return config_problems(caught.value, RunConfig)


def test_a_misspelt_key_gets_the_close_names_of_its_own_section() -> None:
    assert problems({"colector": {"num_envs": 2}}) == [
        "colector: unknown key (value {'num_envs': 2}); did you mean 'collector'?"]
    assert problems({"algo": {"name": "ppo", "net": {"hiden": [3]}}}) == [
        "algo.ppo.net.hiden: unknown key (value [3]); did you mean 'hidden'?"]
    assert problems({"env": {"wrappers": [{"name": "atari", "frame_skp": 3}]}}) == [
        "env.wrappers.0.atari.frame_skp: unknown key (value 3); did you mean 'frame_skip'?"]


def test_a_key_like_none_lists_the_section_s_keys() -> None:
    (line,) = problems({"budget": {"zzz": 1}})
    assert line.startswith("budget.zzz: unknown key (value 1); the keys there are ")
    assert "max_env_steps" in line


def test_a_bad_value_is_named_with_the_rule_it_breaks() -> None:
    assert problems({"budget": {"max_env_steps": -1}}) == [
        "budget.max_env_steps: Input should be greater than or equal to 1 (value -1)"]


def test_a_long_value_is_shortened() -> None:
    (line,) = problems({"collector": {"num_envs": "x" * 500}})
    assert line.endswith("...)") and len(line) < 200


def test_known_keys_of_a_tagged_member() -> None:
    assert "batch_size" in known_keys(RunConfig, ("algo", "dqn"))
    assert "clip_range" not in known_keys(RunConfig, ("algo", "dqn"))
    assert "clip_range" in known_keys(RunConfig, ("algo", "ppo"))
