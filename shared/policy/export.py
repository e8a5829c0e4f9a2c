"""Export a policy for programs without rlfleet or Python: ONNX (onnxruntime in C++, C#, a game engine, a robot) or
TorchScript (libtorch), `rlfleet export`.

The exported model is the whole greedy policy, not just its network: raw observations in (a batch, [N, *shape],
in the manifest's dtype: float32, or uint8 frames as the env gives them), env actions out, so the program that
runs it needs nothing of rlfleet. Observation normalisation, image scaling and layout, an action mask, the head's
greedy choice and the Box rescaling or clipping all happen inside, with the same arithmetic as the numpy actors
(shared/policy/actors.py `decide` with explore=False), which the tests hold it to: discrete heads give int64
actions [N] (q_values, categorical) or [N, k] (multi_categorical); continuous heads float32 [N, dim].

A manifest field this exporter does not know (one a later rlfleet adds, such as a recurrent core) is refused
naming it rather than exported without it.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from rlfleet.shared.payloads.spaces import BoxActions, MultiDiscreteActions
from rlfleet.shared.policy.manifest import PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.storage.local import atomic_write

Format = Literal["onnx", "torchscript"]
FORMATS: tuple[Format, ...] = ("onnx", "torchscript")
HEADS = ("q_values", "categorical", "multi_categorical", "gaussian", "gaussian_sde", "tanh_gaussian")
ENCODERS = ("mlp", "cnn", "nature", "impala")
# The manifest fields the exported model reproduces; any other one that is set changes how the policy acts.
EXPORTED_FIELDS = {"format", "version", "spaces", "encoder", "net", "head", "obs_norm"}
INPUT_NAME, OUTPUT_NAME = "obs", "actions"
ONNX_OPSET = 17


class ExportError(ValueError):
    """A policy the exporter cannot reproduce, or a format it does not write."""


def check_exportable(manifest: PolicyManifest) -> None:
    """ExportError naming the head, encoder or manifest field that the exporter does not handle."""
    if manifest.head not in HEADS:
        raise ExportError(f"cannot export a policy with a {manifest.head!r} head: the exporter handles "
                          f"{', '.join(HEADS)}")
    if manifest.encoder.kind not in ENCODERS:
        raise ExportError(f"cannot export a policy with a {manifest.encoder.kind!r} encoder: the exporter handles "
                          f"{', '.join(ENCODERS)}")
    for name in type(manifest).model_fields:
        value = getattr(manifest, name)
        if name not in EXPORTED_FIELDS and value is not None:
            raise ExportError(f"cannot export a policy with a {name} ({value}): the exported model would act "
                              f"without it; use load_policy(...).predict in Python instead")


class GreedyPolicy(nn.Module):
    """Raw observations -> the env actions of the greedy policy, as one traceable module."""

    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, manifest: PolicyManifest, state: dict[str, np.ndarray]) -> None:
        super().__init__()
        check_exportable(manifest)
        self.head = manifest.head
        self.net = PolicyNet(manifest).eval()
        self.net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
        spaces = manifest.spaces
        action = spaces.action
        self.splits = list(action.nvec) if isinstance(action, MultiDiscreteActions) else []
        self.mask = spaces.mask_slice
        low = action.low if isinstance(action, BoxActions) else ()
        high = action.high if isinstance(action, BoxActions) else ()
        self.register_buffer("low", torch.tensor(low, dtype=torch.float32))
        self.register_buffer("high", torch.tensor(high, dtype=torch.float32))
        self.dim = len(high)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.net(obs)
        if self.head in ("q_values", "categorical"):
            if self.mask is not None:  # illegal actions never win; a row allowing none allows all (actors.legal)
                legal = obs.reshape(obs.shape[0], -1)[:, self.mask] > 0.5
                legal = legal | ~legal.any(dim=1, keepdim=True)
                out = out.masked_fill(~legal, float("-inf"))
            return out.argmax(dim=1)
        if self.head == "multi_categorical":
            return torch.stack([part.argmax(dim=1) for part in torch.split(out, self.splits, dim=1)], dim=1)
        if self.head in ("gaussian", "gaussian_sde"):  # gaussian_sde: the means, then its latent (not acted on)
            return torch.maximum(torch.minimum(out[:, :self.dim], self.high), self.low)
        mean = out[:, :out.shape[1] // 2]  # tanh_gaussian: the mean's tanh, rescaled from [-1, 1] into the bounds
        return self.low + (torch.tanh(mean) + 1.0) * 0.5 * (self.high - self.low)


def signature(manifest: PolicyManifest) -> str:
    """What the exported model takes and returns, for a person: names, dtypes and shapes."""
    obs, action = manifest.spaces.obs, manifest.spaces.action
    if isinstance(action, BoxActions):
        out = f"float32[N, {action.dim}]"
    elif isinstance(action, MultiDiscreteActions):
        out = f"int64[N, {len(action.nvec)}]"
    else:
        out = "int64[N]"
    return f"input {INPUT_NAME!r} {obs.dtype}[N, {', '.join(map(str, obs.shape))}], output {OUTPUT_NAME!r} {out}"


def example_input(manifest: PolicyManifest, batch: int = 2) -> torch.Tensor:
    """A batch of observations in the manifest's dtype: what the traced model is told it takes."""
    obs = manifest.spaces.obs
    return torch.from_numpy(np.zeros((batch, *obs.shape), dtype=obs.dtype))


def export_bytes(manifest: PolicyManifest, state: dict[str, np.ndarray], fmt: Format) -> bytes:
    """The exported model as the bytes of an .onnx or TorchScript .pt file (batch size free)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    model = GreedyPolicy(manifest, state)
    example = example_input(manifest)
    buffer = io.BytesIO()
    # torch warns that TorchScript is deprecated and that tracing fixes Python-level branches (which encoder, whether
    # there are statistics): both are what an exported model of one fixed policy is, so the user sees neither
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        if fmt == "torchscript":
            torch.jit.save(torch.jit.trace(model, (example,)), buffer)
        else:
            try:
                import onnx  # noqa: F401 - the legacy exporter writes through it
            except ImportError as exc:
                raise ExportError("ONNX export needs the onnx extra: pip install 'rlfleet[onnx]'") from exc
            # the TorchScript-based exporter: the torch.export one needs onnxscript, and this model has no control
            # flow that tracing would miss (a file object is fine for it, though its annotation says a path)
            torch.onnx.export(model, (example,), buffer, dynamo=False, opset_version=ONNX_OPSET,  # type: ignore[arg-type]
                              input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                              dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}})
    return buffer.getvalue()


def export_policy(manifest: PolicyManifest, state: dict[str, np.ndarray], fmt: Format, out: Path) -> Path:
    """Write the exported model to `out` (replaced atomically)."""
    atomic_write(out, export_bytes(manifest, state, fmt))
    return out
