"""Acting with a published policy, built from its manifest alone: collectors and the evaluator.

MLP policies run in numpy, which keeps torch (about 200 MB resident per process) out of collectors and the
evaluator; for a handful of envs a numpy forward pass is as fast as torch's. An image encoder (any kind but
mlp) runs in torch (imported only then), one forward pass batched over the envs. Before the first policy
exists, collectors act uniformly at random (`random_actions`).

Each decision has two forms of the action: `actions`, in the policy's units (what the chunk stores and the
learner scores), and `env_actions`, what the env receives (clipped, or rescaled from tanh's [-1, 1], into a
Box's bounds). For discrete heads they are the same array.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from rlfleet.shared.payloads.spaces import BoxActions, MultiDiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Head, ObsNorm, PolicyManifest

ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0, out=x), "tanh": lambda x: np.tanh(x, out=x)}
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # tanh_gaussian's clamp, the same in the learner (shared/policy/nets.py)
TANH_EPS = 1e-6


class PolicyError(ValueError):
    """A state dict that does not fit the network its manifest describes."""


@dataclass
class Decision:
    actions: np.ndarray
    env_actions: np.ndarray
    logp: np.ndarray | None = None


def head_outputs(spaces: Spaces, head: Head) -> int:
    """Width of the network's last layer for this head."""
    action = spaces.action
    if isinstance(action, BoxActions):
        return 2 * action.dim if head == "tanh_gaussian" else action.dim
    if isinstance(action, MultiDiscreteActions):
        return sum(action.nvec)
    return action.n


def to_env(spaces: Spaces, head: Head, actions: np.ndarray) -> np.ndarray:
    """Policy-unit actions -> what the env accepts."""
    action = spaces.action
    if not isinstance(action, BoxActions):
        return actions
    low, high = np.asarray(action.low, np.float32), np.asarray(action.high, np.float32)
    if head == "tanh_gaussian":
        return low + (actions + 1.0) * 0.5 * (high - low)
    return np.clip(actions, low, high)


def legal(spaces: Spaces, obs: np.ndarray) -> np.ndarray | None:
    """[N, n] booleans: the legal actions the observations' mask allows (None: all are). A row that allows none
    (a finished game's last observation) allows all, so a max over it stays finite; nothing acts on it."""
    columns = spaces.mask_slice
    if columns is None:
        return None
    mask = np.asarray(obs).reshape(len(obs), -1)[:, columns] > 0.5
    mask[~mask.any(axis=1)] = True
    return mask


def _uniform_legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One legal action per row, uniformly among that row's legal ones."""
    return (rng.random(mask.shape) * mask).argmax(axis=1).astype(np.int64)


def random_actions(spaces: Spaces, head: Head, n: int, rng: np.random.Generator,
                   obs: np.ndarray | None = None) -> Decision:
    """Uniform random actions in policy units (tanh_gaussian: uniform in [-1, 1]); legal ones under a mask."""
    action = spaces.action
    mask = None if obs is None else legal(spaces, obs)
    if mask is not None:
        acts = _uniform_legal(mask, rng)
    elif isinstance(action, BoxActions):
        if head == "tanh_gaussian":
            acts = rng.uniform(-1.0, 1.0, (n, action.dim)).astype(np.float32)
        else:
            acts = rng.uniform(action.low, action.high, (n, action.dim)).astype(np.float32)
    elif isinstance(action, MultiDiscreteActions):
        acts = np.stack([rng.integers(0, k, n) for k in action.nvec], axis=1).astype(np.int64)
    else:
        acts = rng.integers(0, action.n, n).astype(np.int64)
    return Decision(acts, to_env(spaces, head, acts))


def normalize(obs: np.ndarray, norm: ObsNorm | None) -> np.ndarray:
    x = np.asarray(obs, np.float32)
    if norm is None:
        return x
    mean = np.asarray(norm.mean, np.float32).reshape(x.shape[1:])
    std = np.sqrt(np.asarray(norm.var, np.float32).reshape(x.shape[1:]) + 1e-8)
    return np.clip((x - mean) / std, -norm.clip, norm.clip)


def _categorical(logits: np.ndarray, explore: bool, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (action, log-prob); greedy takes the argmax and still reports its log-prob."""
    logits = logits.astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    if explore:
        cdf = np.exp(logp).cumsum(axis=1)
        u = rng.random((len(logits), 1)) * cdf[:, -1:]
        acts = np.minimum((cdf < u).sum(axis=1), logits.shape[1] - 1)
    else:
        acts = logp.argmax(axis=1)
    return acts.astype(np.int64), logp[np.arange(len(acts)), acts]


def decide(manifest: PolicyManifest, out: np.ndarray, log_std: np.ndarray | None, explore: bool,
           rng: np.random.Generator, epsilon: float = 0.0, mask: np.ndarray | None = None) -> Decision:
    """Turn the network's outputs into actions for `manifest.head` (explore=False: the greedy action); under a
    mask (`legal`), illegal actions' Q-values and logits are -inf, so they are never taken."""
    head, spaces = manifest.head, manifest.spaces
    n = len(out)
    if mask is not None:
        out = np.where(mask, out, -np.inf)
    if head == "q_values":
        acts = out.argmax(axis=1).astype(np.int64)
        if explore and epsilon > 0:
            pick = rng.random(n) < epsilon
            if pick.any():
                acts[pick] = (rng.integers(0, out.shape[1], int(pick.sum())) if mask is None
                              else _uniform_legal(mask[pick], rng))
        return Decision(acts, acts)
    if head == "categorical":
        acts, logp = _categorical(out, explore, rng)
        return Decision(acts, acts, logp.astype(np.float32))
    if head == "multi_categorical":
        assert isinstance(spaces.action, MultiDiscreteActions)
        parts = np.split(out, np.cumsum(spaces.action.nvec)[:-1], axis=1)
        drawn = [_categorical(part, explore, rng) for part in parts]
        acts = np.stack([a for a, _ in drawn], axis=1)
        return Decision(acts, acts, np.sum([lp for _, lp in drawn], axis=0).astype(np.float32))
    if head == "gaussian":
        assert log_std is not None
        std = np.exp(log_std.astype(np.float64))
        noise = rng.standard_normal(out.shape) if explore else np.zeros(out.shape)
        acts = out + std * noise
        logp = (-0.5 * noise ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(axis=1)
        acts32 = acts.astype(np.float32)
        return Decision(acts32, to_env(spaces, head, acts32), logp.astype(np.float32))
    # tanh_gaussian: first half means, second half log-stds
    dim = out.shape[1] // 2
    mean, log_std_out = out[:, :dim].astype(np.float64), np.clip(out[:, dim:], LOG_STD_MIN, LOG_STD_MAX)
    std = np.exp(log_std_out.astype(np.float64))
    noise = rng.standard_normal(mean.shape) if explore else np.zeros(mean.shape)
    acts = np.tanh(mean + std * noise)
    logp = (-0.5 * noise ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi) - np.log(1 - acts ** 2 + TANH_EPS)).sum(1)
    acts32 = acts.astype(np.float32)
    return Decision(acts32, to_env(spaces, head, acts32), logp.astype(np.float32))


class _Actor:
    manifest: PolicyManifest
    log_std: np.ndarray | None

    def forward(self, obs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator, epsilon: float = 0.0) -> Decision:
        return decide(self.manifest, self.forward(obs), self.log_std, explore, rng, epsilon,
                      legal(self.manifest.spaces, obs))

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The env actions of the deterministic policy (argmax, or the mean), for evaluation."""
        return decide(self.manifest, self.forward(obs), self.log_std, False, _UNUSED_RNG,
                      mask=legal(self.manifest.spaces, obs)).env_actions


_UNUSED_RNG = np.random.default_rng(0)  # greedy decisions draw nothing


class NumpyActor(_Actor):
    """An MLP policy in numpy. Weights are kept transposed, [fan_in, fan_out] and contiguous: x @ W then runs
    ~2.5x faster for the small batches collectors use than x @ weight.T (measured, single-threaded OpenBLAS)."""

    def __init__(self, manifest: PolicyManifest, state: dict[str, np.ndarray]) -> None:
        self.manifest = manifest
        sizes = [manifest.spaces.obs.flat_size, *manifest.net.hidden, head_outputs(manifest.spaces, manifest.head)]
        self.activation = ACTIVATIONS[manifest.net.activation]
        expected = {f"body.{2 * i}.{kind}" for i in range(len(sizes) - 1) for kind in ("weight", "bias")}
        if manifest.head == "gaussian":
            expected.add("log_std")
        if set(state) != expected:
            raise PolicyError(f"policy has keys {sorted(state)}, its manifest needs {sorted(expected)}")
        self.layers = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
            weight, bias = state[f"body.{2 * i}.weight"], state[f"body.{2 * i}.bias"]
            if weight.shape != (fan_out, fan_in) or bias.shape != (fan_out,):
                raise PolicyError(f"layer {i}: weight {weight.shape} / bias {bias.shape}, expected "
                                  f"{(fan_out, fan_in)} / {(fan_out,)}")
            self.layers.append((np.ascontiguousarray(weight.T, np.float32), np.ascontiguousarray(bias, np.float32)))
        self.log_std = state.get("log_std")
        if self.log_std is not None and self.log_std.shape != (sizes[-1],):
            raise PolicyError(f"log_std has shape {self.log_std.shape}, expected {(sizes[-1],)}")

    def forward(self, obs: np.ndarray) -> np.ndarray:
        x = normalize(obs, self.manifest.obs_norm).reshape(len(obs), -1)
        for i, (weight, bias) in enumerate(self.layers):
            x = x @ weight
            x += bias
            if i < len(self.layers) - 1:
                x = self.activation(x)
        return x


TORCH_THREADS_VAR = "RLFLEET_TORCH_THREADS"
_threads_set = False


def _torch() -> ModuleType:
    """torch, imported on the first image policy, with its intra-op threads set once for the process: to
    RLFLEET_TORCH_THREADS (the worker setting `torch_threads`), or 1. torch's default of one thread per core
    would have every collector on a machine compete for all of its cores with the envs they step."""
    global _threads_set
    import torch

    if not _threads_set:
        raw = os.environ.get(TORCH_THREADS_VAR, "1")
        try:
            threads = int(raw)
        except ValueError:
            threads = 0
        if threads < 1:
            raise ValueError(f"{TORCH_THREADS_VAR}={raw!r}: set it to a whole number of threads, 1 or more")
        torch.set_num_threads(threads)
        _threads_set = True
    return torch


class TorchActor(_Actor):
    """An image policy: the learner's own network (shared/policy/nets.py), run on the CPU under inference mode,
    one forward pass for the observations of all of a collector's envs at once ([N, *obs] in, [N, outputs] out).
    The uint8 frames enter as they are (a view of the numpy batch, channels-last or first): the network's one
    float conversion is the only copy."""

    def __init__(self, manifest: PolicyManifest, state: dict[str, np.ndarray]) -> None:
        torch = _torch()

        from rlfleet.shared.policy.nets import PolicyNet

        self.manifest, self._torch = manifest, torch
        self.net = PolicyNet(manifest).eval()
        try:
            self.net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
        except RuntimeError as exc:
            raise PolicyError(f"policy does not fit its manifest's network: {exc}") from exc
        log_std = state.get("log_std")
        self.log_std = None if log_std is None else np.asarray(log_std)

    def forward(self, obs: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            return self.net(torch.from_numpy(np.asarray(obs))).numpy()


Actor = NumpyActor | TorchActor


def build_actor(manifest: PolicyManifest, state: dict[str, np.ndarray]) -> Actor:
    """Image encoders act in torch; MLP policies (flat observations, or images flattened) in numpy."""
    return NumpyActor(manifest, state) if manifest.encoder.kind == "mlp" else TorchActor(manifest, state)
