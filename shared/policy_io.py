"""Policy files: safetensors state dicts written atomically into the store under a version-numbered path.

safetensors holds only tensors, so loading a policy never unpickles anything.
"""

from __future__ import annotations

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from shared.layout import policy_path
from shared.store import LocalStore
from shared.wire import PolicyRef


def save_policy(store: LocalStore, version: int, state: dict[str, torch.Tensor]) -> PolicyRef:
    data = st_save({k: v.detach().contiguous().cpu() for k, v in state.items()})
    path = policy_path(version)
    return PolicyRef(version=version, path=path, sha256=store.put(path, data))


def load_policy(store: LocalStore, ref: PolicyRef) -> dict[str, torch.Tensor]:
    """Read and verify (sha256) a policy file; raises FileNotFoundError or IntegrityError."""
    return st_load(store.get(ref.path, ref.sha256, max_bytes=512 * 1024 * 1024))
