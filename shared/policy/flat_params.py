"""One flat parameter vector per policy, in one order everywhere.

Population-based learners perturb and update a policy as a single vector; the learner builds it from its torch
network and collectors from the published numpy state dict. Both go through `flatten` / `unflatten` with the
shapes of `policy_shapes`, which fixes one order by name (layer by layer, weight then bias, as torch lists
the body; then a gaussian head's `log_std`, which torch's state dict lists first), so a vector means the same
weights on every side whatever order a state dict comes in.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlfleet.shared.policy.actors import head_outputs, log_std_shape
from rlfleet.shared.policy.manifest import PolicyManifest


def policy_shapes(manifest: PolicyManifest) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor of the MLP policy the manifest describes, in flattening order."""
    if manifest.encoder.kind != "mlp":
        raise ValueError(f"flat parameter vectors cover MLP policies; this one has a {manifest.encoder.kind} encoder")
    sizes = [manifest.spaces.obs.encoded_size, *manifest.net.hidden, head_outputs(manifest.spaces, manifest.head)]
    shapes: dict[str, tuple[int, ...]] = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        shapes[f"body.{2 * i}.weight"] = (fan_out, fan_in)
        shapes[f"body.{2 * i}.bias"] = (fan_out,)
    std_shape = log_std_shape(manifest.spaces, manifest.head, sizes[-2])
    if std_shape is not None:
        shapes["log_std"] = std_shape
    return shapes


def parameter_count(shapes: Mapping[str, tuple[int, ...]]) -> int:
    return sum(int(np.prod(shape)) for shape in shapes.values())


def flatten(state: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]]) -> np.ndarray:
    """The tensors of `state`, in the order of `shapes`, as one float32 vector."""
    if set(state) != set(shapes):
        raise ValueError(f"state has tensors {sorted(state)}, the policy needs {sorted(shapes)}")
    parts = []
    for name, shape in shapes.items():
        tensor = np.asarray(state[name], np.float32)
        if tensor.shape != shape:
            raise ValueError(f"{name} has shape {tensor.shape}, the policy needs {shape}")
        parts.append(tensor.ravel())
    return np.concatenate(parts)


def unflatten(vector: np.ndarray, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """`flatten`'s inverse: views into `vector`, one per tensor."""
    if vector.shape != (parameter_count(shapes),):
        raise ValueError(f"vector has shape {vector.shape}, the policy has {parameter_count(shapes)} parameters")
    state, start = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        state[name] = vector[start:start + size].reshape(shape)
        start += size
    return state
