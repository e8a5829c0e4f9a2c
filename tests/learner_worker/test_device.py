"""Where the learner's tensors live: batches moved to CUDA through pinned memory, and `learner.amp`. The CUDA
tests run where torch sees a GPU (bench/learner_device.py measures the same paths)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from learner_worker.device import precision, to_device
from shared.config.run_config import LearnerConfig

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
