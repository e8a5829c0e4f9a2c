"""Where the learner's tensors live: the run config's `learner.device` (auto, cpu or cuda).

`auto` takes the GPU when torch sees one, so one config trains on a laptop and on a GPU node. Batches are
built in numpy (payload decoding, n-step targets, GAE) and moved once per update; policies and checkpoints
are written from CPU copies, so a policy trained on a GPU loads in any collector.

On CUDA a batch goes through pinned (page-locked) host memory with a non-blocking copy: the copy runs by DMA while
the host goes on to the next column or launches kernels, and only the kernels that read it wait for it (the
caching host allocator keeps the pinned buffer until the copy is done). From pageable memory the copy would stage
through a driver buffer and block the host.

`learner.amp` trains under autocast on CUDA: bf16 keeps float32's exponent range, so gradients need no loss
scaling. A CPU learner trains in float32 and says so once: a config with `device: auto` runs unchanged on a laptop
and on a GPU node (a config naming `device: cpu` with amp is refused when it loads).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch

log = logging.getLogger("rlfleet.learner")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("learner.device is cuda but torch sees no GPU here: set learner.device to auto or cpu")
    return torch.device(name)


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def precision(amp: Literal["none", "bf16"], device: torch.device
              ) -> Callable[[], contextlib.AbstractContextManager[object]]:
    """What makes the context each update runs in: bf16 autocast on CUDA for `learner.amp: bf16`, otherwise
    float32 (a CPU learner asked for amp says so here, once)."""
    if amp == "none":
        return contextlib.nullcontext
    if device.type != "cuda":
        log.info("learner.amp is %s but the learner trains on %s: float32 (mixed precision is for CUDA)", amp,
                 device)
        return contextlib.nullcontext
    log.info("updates run under %s autocast", amp)
    return lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)
