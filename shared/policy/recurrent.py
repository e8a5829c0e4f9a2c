"""A recurrent core's step in numpy: torch.nn.GRU's and torch.nn.LSTM's equations on their own weights.

Collectors and the evaluator act with MLP policies in numpy (shared/policy/actors.py), without torch. A policy with
a core (`algo.net.core`) keeps that: this module runs one step of the core for a batch of envs from the policy
file's tensors, which are the state dict of the learner's torch layer (`core.rnn.*`, one layer, with biases), so
a numpy actor and the learner compute the same outputs (tests/shared/policy/test_recurrent.py: to 1e-5).

torch's layout, gate rows stacked in this order along the first axis of each [gates * H, ...] tensor:

* GRU, gates r, z, n:  r = s(W_ir x + b_ir + W_hr h + b_hr);  z = s(W_iz x + b_iz + W_hz h + b_hz);
  n = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h' = (1 - z) * n + z * h.
* LSTM, gates i, f, g, o:  i, f, o = s(W_* x + b_i* + W_h* h + b_h*);  g = tanh(...);  c' = f * c + i * g;
  h' = o * tanh(c').

A state is [N, hidden] for a GRU and [N, 2, hidden] (h, then c) for an LSTM (CoreConfig.state_shape); the core's
output, what the MLP reads, is h'.
"""

from __future__ import annotations

import numpy as np

from rlfleet.shared.config.base import CoreConfig

PREFIX = "core.rnn."
WEIGHTS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


def gates(config: CoreConfig) -> int:
    return 3 if config.kind == "gru" else 4


def core_keys(config: CoreConfig, in_dim: int) -> dict[str, tuple[int, ...]]:
    """The state-dict keys of a core reading `in_dim` features, with their shapes."""
    rows = gates(config) * config.hidden
    shapes = ((rows, in_dim), (rows, config.hidden), (rows,), (rows,))
    return {PREFIX + name: shape for name, shape in zip(WEIGHTS, shapes, strict=True)}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # no overflow warning for large |x|, unlike 1 / (1 + exp(-x))


class NumpyCore:
    """One step of the core for a batch: `step(x [N, in], state [N, *state_shape])` -> (h' [N, hidden], state')."""

    def __init__(self, config: CoreConfig, in_dim: int, state: dict[str, np.ndarray]) -> None:
        self.config = config
        for key, shape in core_keys(config, in_dim).items():
            if state[key].shape != shape:
                raise ValueError(f"{key} has shape {state[key].shape}, the manifest's core needs {shape}")
        # Transposed and contiguous, as the actor keeps its MLP's weights: x @ W is the fast form for small batches.
        self.w_ih = np.ascontiguousarray(state[PREFIX + "weight_ih_l0"].T, np.float32)
        self.w_hh = np.ascontiguousarray(state[PREFIX + "weight_hh_l0"].T, np.float32)
        self.b_ih = np.asarray(state[PREFIX + "bias_ih_l0"], np.float32)
        self.b_hh = np.asarray(state[PREFIX + "bias_hh_l0"], np.float32)

    def step(self, x: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hidden = self.config.hidden
        if self.config.kind == "gru":
            h = state
            gi = x @ self.w_ih + self.b_ih
            gh = h @ self.w_hh + self.b_hh
            r = _sigmoid(gi[:, :hidden] + gh[:, :hidden])
            z = _sigmoid(gi[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden])
            n = np.tanh(gi[:, 2 * hidden:] + r * gh[:, 2 * hidden:])
            h_new = ((1.0 - z) * n + z * h).astype(np.float32)
            return h_new, h_new
        h, c = state[:, 0], state[:, 1]
        g = x @ self.w_ih + self.b_ih + h @ self.w_hh + self.b_hh
        i, f = _sigmoid(g[:, :hidden]), _sigmoid(g[:, hidden:2 * hidden])
        cell, o = np.tanh(g[:, 2 * hidden:3 * hidden]), _sigmoid(g[:, 3 * hidden:])
        c_new = f * c + i * cell
        h_new = (o * np.tanh(c_new)).astype(np.float32)
        return h_new, np.stack([h_new, c_new.astype(np.float32)], axis=1)
