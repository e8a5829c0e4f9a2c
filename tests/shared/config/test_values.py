"""Value options are refused at config load when they cannot work, with the setting and the fix named."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.values import CriticValue, Support, ValueTransform, pohlen
from tests.support.repo import REPO


def test_defaults_change_nothing() -> None:
    assert ValueTransform().transform == "none" and CriticValue().head == "scalar"


def test_a_support_that_does_not_cover_the_returns_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"does not cover returns of \+/-500 \(h\(500\) = 21.88\)"):
        CriticValue(transform="pohlen", head="categorical", support=Support(min=-20, max=20), max_abs_return=500)
    CriticValue(transform="pohlen", head="categorical", support=Support(min=-22, max=22), max_abs_return=500)
    with pytest.raises(ValidationError, match="does not cover returns of"):
        CriticValue(head="categorical", support=Support(min=-20, max=20), max_abs_return=500)  # raw units


def test_a_categorical_head_needs_the_returns_it_must_represent() -> None:
    with pytest.raises(ValidationError, match="needs value.max_abs_return"):
        CriticValue(head="categorical")


@pytest.mark.parametrize("support, message", [
    ({"min": 3, "max": 3}, "must be below support.max"), ({"bins": 1}, "greater than or equal to 2")])
def test_a_degenerate_support_is_refused(support: dict[str, float], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Support.model_validate(support)


def test_eps_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="greater than 0"):
        ValueTransform(transform="pohlen", eps=0)


def test_run_configs_carry_the_options() -> None:
    config = RunConfig.model_validate({"algo": {"name": "dqn", "value": {"transform": "pohlen"}}})
    assert config.algo.value.transform == "pohlen"  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="categorical"):  # DQN's Q head is published: no categorical option
        RunConfig.model_validate({"algo": {"name": "dqn", "value": {"head": "categorical"}}})
    raw = yaml.safe_load((REPO / "configs" / "cartpole_ppo.yaml").read_text())
    raw["algo"] = {**raw.get("algo", {}), "name": "ppo", "value": {
        "transform": "pohlen", "head": "categorical", "support": {"min": -25, "max": 25}, "max_abs_return": 500}}
    ppo = RunConfig.model_validate(raw)
    assert ppo.algo.value.support.bins == 51  # type: ignore[attr-defined]


def test_pohlen_matches_its_definition() -> None:
    assert pohlen(3.0, 0.01) == pytest.approx(1.0 + 0.03)
    assert pohlen(-3.0, 0.01) == pytest.approx(-1.03)
