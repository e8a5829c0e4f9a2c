"""Each loop kind's buffer rules (`LoopKind.check`): the kinds with a buffer refuse settings they cannot train on,
naming the fields to change; the kinds without one have nothing to refuse."""

from __future__ import annotations

import pytest

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.loops import loop_of


def _on_policy() -> RunConfig:
    return RunConfig.model_validate({"algo": {"name": "ppo"}, "sampling": {"unit": "chunk"},
                                     "replay": {"sampler": "fifo", "max_use": 1}})


def test_the_replay_kind_refuses_a_queue_naming_the_samplers_that_replay() -> None:
    config = _on_policy()
    with pytest.raises(ValueError, match="ppo trains on transitions: set sampling.unit=transition"):
        loop_of("replay").check(config)
    transitions = config.model_copy(update={"sampling": config.sampling.model_copy(update={"unit": "transition"})})
    with pytest.raises(ValueError, match=r"ppo samples a replay buffer: set replay.sampler to uniform or "
                                         r"prioritized \(got fifo\)"):
        loop_of("replay").check(transitions)


def test_the_chunk_kind_wants_each_chunk_consumed_once() -> None:
    config = _on_policy()
    loop_of("chunks").check(config)
    with pytest.raises(ValueError, match=r"ppo consumes each chunk once: .* \(got fifo, max_use=2\)"):
        loop_of("chunks").check(config.model_copy(update={"replay": config.replay.model_copy(update={"max_use": 2})}))


@pytest.mark.parametrize("kind", ["population", "dataset"])
def test_kinds_without_a_buffer_accept_any_buffer_settings(kind: str) -> None:
    replay_settings = RunConfig()  # transitions from a uniform replay buffer: neither kind reads them
    loop_of(kind).check(replay_settings)
    with pytest.raises(ValueError, match="trains on whole chunks"):
        loop_of("chunks").check(replay_settings)
