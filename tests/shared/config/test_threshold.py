"""shared.config.threshold: env.solve_threshold left out is the env's registered reward_threshold (or none),
null is no threshold, anything but a finite number is a clear config error, and every shipped config keeps the
threshold it had."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from rlfleet.shared.config.env import REGISTERED, EnvConfig
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import RunConfig, load_run_config
from rlfleet.shared.config.threshold import has_solve_rule, resolve_threshold, threshold_note
from tests.support.configs import shipped_configs

OLD_DEFAULT = 475.0  # every env's threshold before it came from the registration


def config_with(env: dict) -> RunConfig:
    return RunConfig.model_validate({"env": env})


@pytest.mark.parametrize(("env_id", "registered"), [("CartPole-v1", 475.0), ("Acrobot-v1", -100.0),
                                                    ("Pendulum-v1", None)])
def test_left_out_it_is_the_registrations_reward_threshold(env_id: str, registered: float | None) -> None:
    given = config_with({"id": env_id})
    assert given.env.solve_threshold == REGISTERED
    resolved = resolve_threshold(given)
    assert resolved.env.threshold == registered
    assert has_solve_rule(resolved) is (registered is not None)
    note = threshold_note(given, resolved)
    assert (f"env.solve_threshold: {registered:g} (the reward_threshold of {env_id}'s gymnasium registration)"
            if registered is not None else f"none ({env_id} registers no reward_threshold)") in note


def test_a_users_own_entry_point_registers_none() -> None:
    resolved = resolve_threshold(config_with({"id": "tests.support.userenv:CountEnv"}))
    assert resolved.env.threshold is None and not has_solve_rule(resolved)


def test_an_explicit_value_or_null_stands_whatever_the_registration_says() -> None:
    for value in (10.0, None):
        given = config_with({"id": "CartPole-v1", "solve_threshold": value})
        resolved = resolve_threshold(given)
        assert resolved is given and resolved.env.threshold == value
        assert "set in the config" in threshold_note(given, resolved)
    assert "trains to its budget" in threshold_note(*[config_with({"solve_threshold": None})] * 2)


def test_a_resolved_config_round_trips_through_the_journal_and_a_dump() -> None:
    """The journal and config.yaml hold what applied: null stays null, not the registration's default again."""
    for value in (None, 475.0):
        resolved = resolve_threshold(config_with({"id": "CartPole-v1", "solve_threshold": value}))
        assert RunConfig.model_validate(resolved.model_dump(mode="json")).env.threshold == value


def test_an_unresolved_threshold_is_never_read_as_a_number() -> None:
    with pytest.raises(RuntimeError, match="resolve_threshold"):
        _ = EnvConfig().threshold


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf", "high", "true", "[475]"])
def test_a_threshold_that_is_not_a_finite_number_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(f"env: {{id: CartPole-v1, solve_threshold: {text}}}\n")
    with pytest.raises(ValidationError, match=r"env.solve_threshold must be a finite number, null \(no threshold\)"):
        load_run_config(path)


def test_a_number_in_quotes_still_loads() -> None:
    assert config_with({"solve_threshold": "-200"}).env.threshold == -200.0


def test_the_preflight_plans_the_run_with_the_threshold_resolved() -> None:
    assert preflight(config_with({"id": "CartPole-v1"})).config.env.threshold == 475.0


@pytest.mark.parametrize("path", shipped_configs())
def test_every_shipped_config_keeps_its_threshold(path: Path) -> None:
    """A config that set one keeps it; one that left it out had 475, and its env (CartPole) registers 475; a
    battle rule decides instead of a threshold, as before."""
    config = load_run_config(path)
    written = (yaml.safe_load(path.read_text()).get("env") or {}).get("solve_threshold", OLD_DEFAULT)
    resolved = preflight(config).config
    assert has_solve_rule(resolved)
    if not resolved.evaluation.against:
        assert resolved.env.threshold == written
