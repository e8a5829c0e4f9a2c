"""Where the learner's tensors live: batches moved to CUDA through pinned memory, and `learner.amp`. The CUDA
tests run where torch sees a GPU (bench/learner_device.py measures the same paths)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.a2c import A2C
from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.algorithms.impala import Impala
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.learner_worker.algorithms.sac import SAC
from rlfleet.learner_worker.device import precision, to_device
from rlfleet.shared.algorithms.a2c import A2CParams
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.algorithms.sac import SACParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.run_config import LearnerConfig
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import N_ACTIONS, OBS_DIM, make_batch, make_chunk
from tests.support.policies import EPSILON_GREEDY, PENDULUM, SAMPLING, flat_spaces

NET = NetConfig(hidden=(16,))
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def test_a_cpu_batch_is_the_array_itself() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # not contiguous
    tensor = to_device(array, torch.device("cpu"))
    assert tensor.device.type == "cpu" and not tensor.is_pinned()
    assert np.array_equal(tensor.numpy(), array)


def test_amp_on_a_cpu_learner_trains_in_float32_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "rlfleet.learner"):
        context = precision("bf16", torch.device("cpu"))
    assert "float32 (mixed precision is for CUDA)" in caplog.text
    with context():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


def test_amp_with_a_cpu_device_is_refused_naming_what_to_change() -> None:
    with pytest.raises(ValueError, match="learner.amp \\(bf16\\) is mixed precision on CUDA: set learner.device"):
        LearnerConfig(device="cpu", amp="bf16")
    assert LearnerConfig(device="auto", amp="bf16").amp == "bf16"  # a laptop runs it in float32


@CUDA
def test_a_cuda_batch_arrives_intact_through_pinned_memory() -> None:
    array = np.random.default_rng(0).integers(0, 256, (64, 4, 84, 84), dtype=np.uint8)
    tensor = to_device(array, torch.device("cuda"))
    assert tensor.device.type == "cuda"
    assert np.array_equal(tensor.cpu().numpy(), array)


@CUDA
def test_bf16_autocast_on_cuda() -> None:
    with precision("bf16", torch.device("cuda"))():
        out = torch.ones(8, 8, device="cuda") @ torch.ones(8, 8, device="cuda")
    assert out.dtype == torch.bfloat16


def test_every_gradient_learner_updates_under_bf16_autocast() -> None:
    """What `learner.amp: bf16` runs on CUDA, here with the CPU's bf16 autocast: network outputs come out in
    bfloat16, which numpy cannot hold. The conversions for GAE, V-trace and priorities read float32 copies (on the
    H100 PPO's first bf16 update raised "Got unsupported ScalarType BFloat16")."""
    chunks = [make_chunk(1), make_chunk(2)]
    cases = [(PPO(flat_spaces(OBS_DIM, N_ACTIONS), PPOParams(net=NET, minibatch_size=16), SAMPLING, 0), chunks),
             (Impala(flat_spaces(OBS_DIM, N_ACTIONS), ImpalaParams(net=NET), SAMPLING, 0), chunks),
             (A2C(flat_spaces(OBS_DIM, N_ACTIONS), A2CParams(net=NET), SAMPLING, 0), chunks),
             (DQN(flat_spaces(OBS_DIM, N_ACTIONS), DQNParams(net=NET), EPSILON_GREEDY, 0), make_batch(4)),
             (SAC(PENDULUM, SACParams(net=NET), Behaviour(head="tanh_gaussian", sample=False), 0),
              make_batch(5) | {"obs": np.zeros((64, 3), np.float32), "boot_obs": np.zeros((64, 3), np.float32),
                               "actions": np.zeros((64, 1), np.float32)})]
    for learner, batch in cases:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            losses = learner.update(batch)
        assert all(np.isfinite(v) for v in losses.values()), (type(learner).__name__, losses)
