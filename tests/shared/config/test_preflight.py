"""The preflight's check of algo.net against the env's observations: an encoder that cannot read them is refused at
load, naming the field and what fits; one that can passes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlfleet.shared.algorithms.recurrent_ppo import RecurrentPPOParams
from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import RunConfig

PIXELS = "tests.support.pixelgrid:PixelGrid"  # 5x5x3 uint8 frames


def config(env_id: str, encoder: dict, algo: str = "ppo") -> RunConfig:
    doc: dict = {"env": {"id": env_id, "solve_threshold": 1.0},
                 "algo": {"name": algo, "net": {"hidden": [16], "encoder": encoder}}}
    if algo == "ppo":
        doc.update(sampling={"unit": "chunk"}, replay={"sampler": "fifo", "max_use": 1})
    return RunConfig.model_validate(doc)


def test_the_nature_encoder_on_small_frames_is_refused_naming_the_field_and_what_fits() -> None:
    with pytest.raises(ValidationError, match=r"algo.net.encoder: the nature encoder needs frames of at least 36x36 "
                                              r".*nothing of 5x5\): use \{kind: impala\} or \{kind: cnn\}"):
        preflight(config(PIXELS, {"kind": "nature"}))


def test_an_image_encoder_on_flat_observations_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"algo.net.encoder: the impala encoder reads images .* float32\[4\]"):
        preflight(config("CartPole-v1", {"kind": "impala"}, algo="dqn"))


def test_an_mlp_encoder_on_a_dict_holding_an_image_is_refused_naming_the_encoders_that_read_it() -> None:
    with pytest.raises(ValidationError, match=r"algo.net.encoder: this env's Dict or Tuple observation holds images, "
                                              r"which an mlp encoder cannot read: use \{kind: cnn\}"):
        preflight(config("tests.support.pixelgrid:DictPixelGrid", {"kind": "mlp"}))
    preflight(config("tests.support.pixelgrid:DictPixelGrid", {"kind": "impala"}))


@pytest.mark.parametrize("encoder", [{"kind": "impala", "channels": [8, 8]}, {"kind": "cnn"}, {"kind": "mlp"}])
def test_encoders_that_fit_the_frames_pass(encoder: dict) -> None:
    plan = preflight(config(PIXELS, encoder))
    assert plan.config.algo.net.encoder is not None and plan.config.algo.net.encoder.kind == encoder["kind"]


def test_a_trunk_choice_for_an_algorithm_without_a_critic_is_refused_at_validation() -> None:
    with pytest.raises(ValidationError, match="dqn has no such pair: leave algo.net.trunk out"):
        RunConfig.model_validate({"algo": {"name": "dqn", "net": {"trunk": "shared"}}})
    ppo = RunConfig.model_validate({"algo": {"name": "ppo", "net": {"trunk": "separate"}},
                                    "sampling": {"unit": "chunk"}, "replay": {"sampler": "fifo", "max_use": 1}})
    assert ppo.algo.net.trunk == "separate"


def test_an_initialisation_choice_for_an_algorithm_without_a_critic_is_refused_at_validation() -> None:
    with pytest.raises(ValidationError, match="dqn has no such pair: leave algo.net.init out"):
        RunConfig.model_validate({"algo": {"name": "dqn", "net": {"init": "orthogonal"}}})


def test_a_critic_core_of_its_own_without_a_core_is_refused_at_validation() -> None:
    with pytest.raises(ValidationError, match="separate_core .* needs algo.net.core"):
        RunConfig.model_validate({"algo": {"name": "ppo", "net": {"trunk": "separate_core"}},
                                  "sampling": {"unit": "chunk"}, "replay": {"sampler": "fifo", "max_use": 1}})
    params = RecurrentPPOParams(net=NetConfig(trunk="separate_core", core=CoreConfig(kind="lstm", hidden=8)))
    assert params.net.trunk == "separate_core"


def test_state_dependent_exploration_of_discrete_actions_is_refused_naming_the_field() -> None:
    doc = {"env": {"id": "CartPole-v1"}, "algo": {"name": "ppo", "sde_sample_freq": 4}, "sampling": {"unit": "chunk"},
           "replay": {"sampler": "fifo", "max_use": 1}}
    with pytest.raises(ValidationError, match=r"algo.sde_sample_freq explores Box actions; env 'CartPole-v1' has "
                                              r"discrete actions: remove it"):
        preflight(RunConfig.model_validate(doc))
