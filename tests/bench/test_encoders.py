"""bench/encoders.py compares what it says: rl-zoo's Atari batch and the parameter counts the issue quotes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_encoders", REPO / "bench" / "encoders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_arms_have_the_parameter_counts_of_the_policies_they_stand_for() -> None:
    bench = _load_bench()
    cpu = torch.device("cpu")
    counts = {label: bench.counts(bench.PPO(bench.SPACES, bench.params_for(*arm), bench.BEHAVIOUR, 0, cpu))
              for label, arm in bench.ARMS.items()}
    assert counts["cnn / separate"]["trained_params"] == 14_465_767  # "14.5M" in the issue: two copies
    assert counts["nature / shared"]["trained_params"] == 1_687_719  # SB3's CnnPolicy: 1.69M
    assert counts["nature / separate"]["trained_params"] == 1_687_206 + 1_684_641  # the critic: a 1-output copy
    assert counts["nature / shared"]["actor_params"] == counts["nature / separate"]["actor_params"] == 1_687_206


def test_the_batch_is_a_chunk_of_eight_envs_of_4x84x84_stacks() -> None:
    bench = _load_bench()
    chunk = bench.make_chunk(1024, seed=0)
    assert chunk["obs"].shape == (128, 8, 4, 84, 84) and chunk["obs"].dtype == np.uint8
    np.testing.assert_array_equal(chunk["next_obs"][:-1], chunk["obs"][1:])  # consecutive frames of one rollout
    cfg = bench.params_for({"kind": "nature"}, "shared")
    assert (cfg.epochs, cfg.minibatch_size, cfg.learning_rate, cfg.clip_range) == (4, 256, 2.5e-4, 0.1)
