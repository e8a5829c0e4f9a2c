"""Policy files: safetensors state dicts written atomically into the store under a version-numbered path.

safetensors holds only tensors, so loading a policy never unpickles anything. Writing needs torch (only the
learner writes); reading gives numpy arrays, so collectors and the evaluator never import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from safetensors.numpy import load as st_load_numpy

from shared.layout import policy_path
from shared.store import LocalStore
from shared.wire import PolicyRef

if TYPE_CHECKING:
    import torch

MAX_POLICY_BYTES = 512 * 1024 * 1024


def save_policy(store: LocalStore, version: int, state: dict[str, torch.Tensor]) -> PolicyRef:
    from safetensors.torch import save as st_save  # the learner has torch loaded anyway

    data = st_save({k: v.detach().contiguous().cpu() for k, v in state.items()})
    path = policy_path(version)
    return PolicyRef(version=version, path=path, sha256=store.put(path, data))


def load_policy(store: LocalStore, ref: PolicyRef) -> dict[str, np.ndarray]:
    """Read and verify (sha256) a policy file; raises FileNotFoundError or IntegrityError."""
    return st_load_numpy(store.get(ref.path, ref.sha256, max_bytes=MAX_POLICY_BYTES))
