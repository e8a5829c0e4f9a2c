"""Where the learner's tensors live: the run config's `learner.device` (auto, cpu or cuda).

`auto` takes the GPU when torch sees one, so one config trains on a laptop and on a GPU node. Batches are
built in numpy (payload decoding, n-step targets, GAE) and moved once per update; policies and checkpoints
are written from CPU copies, so a policy trained on a GPU loads in any collector.
"""

from __future__ import annotations

import numpy as np
import torch


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("learner.device is cuda but torch sees no GPU here: set learner.device to auto or cpu")
    return torch.device(name)


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device, non_blocking=True)
