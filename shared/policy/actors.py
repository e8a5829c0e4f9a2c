"""Acting with a published policy, built from its manifest alone: collectors and the evaluator.

MLP policies run in numpy, which keeps torch (about 200 MB resident per process) out of collectors and the
evaluator; for a handful of envs a numpy forward pass is as fast as torch's. An image encoder (any kind but
mlp) runs in torch (imported only then), one forward pass batched over the envs. Before the first policy
exists, collectors act uniformly at random (`random_actions`).

Each decision has two forms of the action: `actions`, in the policy's units (what the chunk stores and the
learner scores), and `env_actions`, what the env receives (clipped, or rescaled from tanh's [-1, 1], into a
Box's bounds). For discrete heads they are the same array.

A policy with a recurrent core (`manifest.core`) is stateful: the actor carries one core state per env of the
batch it acts for, [N, *state_shape], zero at first. Whoever steps the envs says where episodes begin: `reset(done)`
after a step zeroes the state of the envs whose episode ended there (an env error's restart included), `reset()`
forgets every env (a new set of episodes, or another number of envs). `core_state` is the state the next action
will start from (what a chunk stores for its first row), `load_core_state` hands it to a newly built actor of the
same core. An env whose state turns non-finite acts from a zero state instead and is flagged in the decision's
`broken` (collectors count that step as an env error); its state restarts from zero. Memoryless actors accept the
same calls and do nothing, so every caller can use one API.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from rlfleet.shared.payloads.spaces import BoxActions, MultiDiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Head, PolicyManifest
from rlfleet.shared.policy.obs_encoding import ObsEncoder
from rlfleet.shared.policy.recurrent import NumpyCore, core_keys

ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0, out=x), "tanh": lambda x: np.tanh(x, out=x)}
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # tanh_gaussian's clamp, the same in the learner (shared/policy/nets.py)
TANH_EPS = 1e-6
SDE_EPS = 1e-6  # added to gaussian_sde's variance (as SB3 does), so a row whose latent features are all 0 has a density


class PolicyError(ValueError):
    """A state dict that does not fit the network its manifest describes."""


@dataclass
class Decision:
    actions: np.ndarray
    env_actions: np.ndarray
    logp: np.ndarray | None = None
    broken: np.ndarray | None = None  # [N] bool: envs whose core state turned non-finite (None: none did)


def head_outputs(spaces: Spaces, head: Head) -> int:
    """Width of the network's last layer for this head."""
    action = spaces.action
    if isinstance(action, BoxActions):
        return 2 * action.dim if head == "tanh_gaussian" else action.dim
    if isinstance(action, MultiDiscreteActions):
        return sum(action.nvec)
    return action.n


def log_std_shape(spaces: Spaces, head: Head, width: int) -> tuple[int, ...] | None:
    """The shape of the head's `log_std` tensor for a network whose last hidden layer has `width` units: one per
    action dimension (gaussian), one per latent feature and action dimension (gaussian_sde); None: no such tensor."""
    action = spaces.action
    if not isinstance(action, BoxActions) or head not in ("gaussian", "gaussian_sde"):
        return None
    return (action.dim,) if head == "gaussian" else (width, action.dim)


def sde_std(latent: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """gaussian_sde's standard deviation per row and action dimension: sqrt(latent^2 @ exp(log_std)^2 + eps), the
    spread of latent @ (exp(log_std) * W) over unit normal weights W [width, dim]."""
    return np.sqrt((latent ** 2) @ np.exp(2.0 * log_std) + SDE_EPS)


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
           rng: np.random.Generator, epsilon: float = 0.0, mask: np.ndarray | None = None,
           weights: np.ndarray | None = None) -> Decision:
    """Turn the network's outputs into actions for `manifest.head` (explore=False: the greedy action); under a
    mask (`legal`), illegal actions' Q-values and logits are -inf, so they are never taken. `weights` [N, width,
    dim]: gaussian_sde's unit normal exploration weights per env (explore=True needs them)."""
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
    if head == "gaussian_sde":
        assert log_std is not None and isinstance(spaces.action, BoxActions)
        dim = spaces.action.dim
        mean, latent = out[:, :dim].astype(np.float64), out[:, dim:].astype(np.float64)
        std = sde_std(latent, log_std.astype(np.float64))
        if explore:
            assert weights is not None, "gaussian_sde explores with per-env weights (_Actor.act draws them)"
            noise = np.einsum("nl,nld->nd", latent, np.exp(log_std.astype(np.float64)) * weights)
        else:
            noise = np.zeros(mean.shape)
        acts = mean + noise
        logp = (-0.5 * (noise / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(axis=1)
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
    _state: np.ndarray | None = None  # [N, *state_shape] for a core; None: zeros for whatever N comes next
    _weights: np.ndarray | None = None  # gaussian_sde's exploration weights, [N, width, dim]
    _weights_age = 0  # explored steps since they were drawn

    def _step(self, obs: np.ndarray, state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """The network's outputs for `obs` [N, *obs] from core state `state` (None without a core), and the state
        after the step."""
        raise NotImplementedError

    @property
    def recurrent(self) -> bool:
        return self.manifest.core is not None

    def core_state(self, n: int) -> np.ndarray | None:
        """A copy of the state the next action for n envs starts from; None for a memoryless policy."""
        core = self.manifest.core
        if core is None:
            return None
        if self._state is None or len(self._state) != n:
            return np.zeros((n, *core.state_shape), np.float32)
        return self._state.copy()

    def load_core_state(self, state: np.ndarray | None) -> None:
        """Continue from `state` (another actor's `core_state`): a new policy version takes over mid-episode
        without forgetting. Ignored when this policy has no core or its state has another shape."""
        core = self.manifest.core
        if core is not None and state is not None and state.shape[1:] == core.state_shape:
            self._state = np.array(state, np.float32)

    def reset(self, done: np.ndarray | None = None) -> None:
        """Zero the state of the envs where `done` [N] is true (their next step begins an episode); None: of
        every env."""
        if done is None or self._state is None:
            self._state = None
        elif len(done) == len(self._state):
            self._state[np.asarray(done, bool)] = 0.0
        else:
            self._state = None

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """The network's outputs for `obs` [N, *obs], advancing the core state."""
        return self._forward(obs)[0]

    def _forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """`forward`, with the envs whose state turned non-finite (None: none did): their outputs are those of a
        zero state and their state restarts from zero."""
        n = len(obs)
        state = self.core_state(n)
        out, after = self._step(obs, state)
        if after is None:
            return out, None
        broken = ~np.isfinite(after.reshape(n, -1)).all(axis=1)
        if broken.any():
            fresh = np.zeros((int(broken.sum()), *after.shape[1:]), np.float32)
            out[broken] = self._step(obs[broken], fresh)[0]
            after[broken] = 0.0
        self._state = after
        return out, broken if broken.any() else None

    def act(self, obs: np.ndarray, explore: bool, rng: np.random.Generator, epsilon: float = 0.0,
            noise_every: int = 1) -> Decision:
        """The decision for a batch of observations; `noise_every`: the explored steps a gaussian_sde head keeps
        its exploration weights before drawing new ones (the behaviour's sde_sample_freq)."""
        out, broken = self._forward(obs)
        weights = self._exploration_weights(len(obs), rng, noise_every) if explore else None
        decision = decide(self.manifest, out, self.log_std, explore, rng, epsilon, legal(self.manifest.spaces, obs),
                          weights)
        decision.broken = broken
        return decision

    def _exploration_weights(self, n: int, rng: np.random.Generator, every: int) -> np.ndarray | None:
        """gaussian_sde's unit normal weights for n envs (None for other heads), drawn afresh every `every`
        explored steps, for another number of envs, and with each new actor (a new policy version), as SB3 redraws
        them every sde_sample_freq steps and at every rollout's start."""
        if self.manifest.head != "gaussian_sde":
            return None
        if self._weights is None or len(self._weights) != n or self._weights_age >= every:
            assert self.log_std is not None
            self._weights = rng.standard_normal((n, *self.log_std.shape))
            self._weights_age = 0
        self._weights_age += 1
        return self._weights

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
        self.encode = ObsEncoder(manifest.spaces.obs, manifest.obs_norm)
        core = manifest.core
        features = manifest.spaces.obs.encoded_size
        sizes = [features if core is None else core.hidden, *manifest.net.hidden,
                 head_outputs(manifest.spaces, manifest.head)]
        self.activation = ACTIVATIONS[manifest.net.activation]
        expected = {f"body.{2 * i}.{kind}" for i in range(len(sizes) - 1) for kind in ("weight", "bias")}
        std_shape = log_std_shape(manifest.spaces, manifest.head, sizes[-2])
        if std_shape is not None:
            expected.add("log_std")
        if core is not None:
            expected |= set(core_keys(core, features))
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
        if self.log_std is not None and self.log_std.shape != std_shape:
            raise PolicyError(f"log_std has shape {self.log_std.shape}, expected {std_shape}")
        self.sde = manifest.head == "gaussian_sde"
        try:
            self.core = None if core is None else NumpyCore(core, features, state)
        except ValueError as exc:
            raise PolicyError(str(exc)) from exc

    def _step(self, obs: np.ndarray, state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        x = self.encode(obs)
        if self.core is not None:
            assert state is not None
            x, state = self.core.step(x, state)
        *hidden, (weight, bias) = self.layers
        for hidden_weight, hidden_bias in hidden:
            x = x @ hidden_weight
            x += hidden_bias
            x = self.activation(x)
        out = x @ weight
        out += bias
        return (np.concatenate([out, x], axis=1) if self.sde else out), state  # gaussian_sde: its latent too


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

    def _step(self, obs: np.ndarray, state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(np.asarray(obs))
            if state is None:
                return self.net(x).numpy(), None
            out, after = self.net.step(x, torch.from_numpy(state))
            return out.numpy(), after.numpy()


Actor = NumpyActor | TorchActor


def build_actor(manifest: PolicyManifest, state: dict[str, np.ndarray]) -> Actor:
    """Image encoders act in torch; MLP policies (flat observations, or images flattened) in numpy."""
    return NumpyActor(manifest, state) if manifest.encoder.kind == "mlp" else TorchActor(manifest, state)
