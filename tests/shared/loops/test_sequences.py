"""The sequence loop kind's refusals: each names the fields to change, at config load, before any process starts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.loops import loop_of


def _config(**changes: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "collector": {"num_envs": 4, "chunk_steps": 32},
        "replay": {"sampler": "prioritized"},
        "sampling": {"unit": "sequence", "sequence_length": 16},
        "algo": {"name": "r2d2", "burn_in": 8, "batch_size": 8, "batches_per_request": 4},
    }
    for section, fields in changes.items():
        raw[section] = {**raw[section], **fields}
    return raw


def test_a_fitting_sequence_run_loads() -> None:
    config = RunConfig.model_validate(_config())
    loop_of("sequences").check(config)
    # the burn-in and the sequence exactly fill the chunk
    RunConfig.model_validate(_config(sampling={"sequence_length": 24}))


@pytest.mark.parametrize(("changes", "message"), [
    ({"sampling": {"unit": "transition"}}, r"r2d2 trains on sequences: set sampling.unit=sequence \(got transition\)"),
    ({"sampling": {"sequence_length": 25}},
     r"sampling.sequence_length \(25\) \+ algo.burn_in \(8\) = 33 rows do not fit in a chunk of "
     r"collector.chunk_steps=32 rows"),
    ({"algo": {"burn_in": 20}}, r"algo.burn_in \(20\) = 36 rows do not fit"),
    ({"sampling": {"n_episode": 2}}, r"leave sampling.n_episode unset"),
    ({"sampling": {"max_batch_size": 256}},
     r"algo.batch_size x algo.batches_per_request x sampling.sequence_length = 512 transitions, outside "
     r"sampling.min_batch_size \(1\) .. sampling.max_batch_size \(256\)"),
])
def test_settings_the_sequences_cannot_be_served_with_are_refused_naming_the_fields(
        changes: dict[str, dict[str, Any]], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RunConfig.model_validate(_config(**changes))


def test_a_run_without_a_recurrent_core_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match=r"r2d2 trains a recurrent core: set algo.net.core"):
        RunConfig.model_validate(_config(algo={"net": {"hidden": [16]}}))
    # The kind refuses it for any algorithm on it, not only through the algorithm's own model.
    config = RunConfig.model_validate(_config())
    coreless = config.algo.model_copy(update={"net": config.algo.net.model_copy(update={"core": None})})
    with pytest.raises(ValueError, match=r"r2d2 trains a recurrent core from sequences: set algo.net.core"):
        loop_of("sequences").check(config.model_copy(update={"algo": coreless}))


def test_an_algorithm_without_the_kinds_parameters_is_refused() -> None:
    transitions = RunConfig()  # dqn's ReplayParams have no burn_in
    with pytest.raises(TypeError, match="must derive from SequenceParams"):
        loop_of("sequences").check(transitions)
