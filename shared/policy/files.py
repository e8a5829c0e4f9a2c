"""Policy files: safetensors weights plus their manifest, written atomically under a version-numbered path.

safetensors holds only tensors and string metadata, so loading a policy never unpickles anything. The
manifest (shared/policy/manifest.py) sits in the file's metadata, so a policy file is self-describing and one
sha256 covers both. Writing needs torch (only the learner writes); reading gives numpy arrays, so collectors
and the evaluator never import torch for MLP policies.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING

import numpy as np
from safetensors.numpy import load as st_load_numpy

from rlfleet.shared.policy.manifest import MANIFEST_KEY, ManifestError, PolicyManifest
from rlfleet.shared.storage.layout import policy_path
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import PolicyRef

if TYPE_CHECKING:
    import torch

MAX_POLICY_BYTES = 512 * 1024 * 1024


def policy_bytes(state: dict[str, torch.Tensor], manifest: PolicyManifest) -> bytes:
    from safetensors.torch import save as st_save  # the learner has torch loaded anyway

    return st_save({k: v.detach().contiguous().cpu() for k, v in state.items()},
                   metadata={MANIFEST_KEY: manifest.to_json()})


def save_policy(store: PayloadStore, version: int, state: dict[str, torch.Tensor],
                manifest: PolicyManifest) -> PolicyRef:
    path = policy_path(version)
    return PolicyRef(version=version, path=path, sha256=store.put(path, policy_bytes(state, manifest)))


def read_manifest(data: bytes) -> PolicyManifest:
    """The manifest from a safetensors file's header (8-byte length, then a JSON header)."""
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + size])
        text = header.get("__metadata__", {}).get(MANIFEST_KEY)
    except (struct.error, ValueError, AttributeError) as exc:
        raise ManifestError(f"not a safetensors file: {exc}") from exc
    return PolicyManifest.from_json(text)


def decode_policy(data: bytes) -> tuple[PolicyManifest, dict[str, np.ndarray]]:
    manifest = read_manifest(data)
    try:
        return manifest, st_load_numpy(data)
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise ManifestError(f"unreadable policy weights: {exc}") from exc


def load_policy(store: PayloadStore, ref: PolicyRef) -> tuple[PolicyManifest, dict[str, np.ndarray]]:
    """Read and verify (sha256) a policy file; raises FileNotFoundError, IntegrityError or ManifestError."""
    return decode_policy(store.get(ref.path, ref.sha256, max_bytes=MAX_POLICY_BYTES))
