"""Evolution strategies (Salimans et al. 2017), the master's side: draw a generation's perturbations and turn
the returns collectors report into one step on the flat parameter vector.

    g = 1 / (n * sigma) * sum_k  w_k * sign_k * eps_k,    w = centred ranks of the n returns received

eps_k is the member's slice of the shared noise table; antithetic pairs share it with opposite signs. Ranks
make the step invariant to the scale of the returns and robust to outliers; a generation closed with a
fraction of its members (stragglers) ranks what arrived. The optimizer (AdamW, or SGD with momentum and L2)
minimises -g on the flat vector, which is flattened and unflattened with shared/policy/flat_params.py, the same
order collectors perturb in. Weights start as torch's initialisation of the published network.
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.es import ESParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.flat_params import flatten, policy_shapes, unflatten
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.policy.noise_table import NoiseTable, noise_table
from rlfleet.shared.wire import MemberOutcome, MemberSpec, Perturbation


def centred_ranks(returns: np.ndarray) -> np.ndarray:
    """Each return's rank scaled to [-0.5, 0.5] (the best 0.5); all zero for fewer than two returns."""
    n = len(returns)
    if n < 2:
        return np.zeros(n)
    ranks = np.empty(n)
    ranks[np.argsort(returns, kind="stable")] = np.arange(n)
    return ranks / (n - 1) - 0.5


def gradient_estimate(weights: np.ndarray, indices: np.ndarray, signs: np.ndarray, table: NoiseTable, dim: int,
                      sigma: float) -> np.ndarray:
    """The ascent direction sum_k w_k * sign_k * eps_k / (n * sigma), float64."""
    grad = np.zeros(dim)
    for weight, index, sign in zip(weights, indices, signs, strict=True):
        grad += (weight * sign) * table.get(int(index), dim)
    return grad / (len(weights) * sigma)


class ES:
    td_abs = None  # no priorities: ES trains on returns, not on sampled transitions

    def __init__(self, spaces: Spaces, cfg: ESParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.cfg, self.seed = cfg, seed
        self._manifest = PolicyManifest.of(spaces, cfg.net, behaviour.head)
        self.shapes = policy_shapes(self._manifest)
        initial = {name: t.numpy() for name, t in PolicyNet(self._manifest).state_dict().items()}
        self.theta = torch.nn.Parameter(torch.from_numpy(flatten(initial, self.shapes)))  # small: on the CPU
        self.optimizer = (
            BackgroundOptimizer(torch.optim.AdamW, [self.theta], lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
            if cfg.optimizer == "adam" else
            BackgroundOptimizer(torch.optim.SGD, [self.theta], lr=cfg.learning_rate, momentum=cfg.momentum,
                                weight_decay=cfg.weight_decay))
        self.table = noise_table(cfg.noise_seed, cfg.noise_table_size)
        self.updates = 0

    @property
    def dim(self) -> int:
        return int(self.theta.numel())

    def members(self) -> list[MemberSpec]:
        """The next generation: population / 2 distinct offsets, each with both signs. Drawn from a stream of
        (seed, updates), so a learner resumed from a checkpoint draws what it would have drawn."""
        rng = np.random.default_rng([self.seed, self.updates])
        offsets = self.table.sample(rng, self.dim, self.cfg.population // 2)
        return [MemberSpec(noise_index=int(i), sign=sign) for i in offsets for sign in (1, -1)]

    def perturbation(self) -> Perturbation:
        cfg = self.cfg
        return Perturbation(noise_seed=cfg.noise_seed, noise_size=cfg.noise_table_size, sigma=cfg.sigma,
                            episodes=cfg.episodes_per_member, max_steps=cfg.max_steps_per_member,
                            lease_seconds=cfg.member_lease_seconds)

    def update(self, results: list[MemberOutcome]) -> dict[str, float]:
        if len(results) < 2:
            raise ValueError(f"a generation with {len(results)} result(s) has nothing to rank")
        returns = np.array([r.mean_return for r in results])
        grad = gradient_estimate(centred_ranks(returns), np.array([r.noise_index for r in results]),
                                 np.array([r.sign for r in results]), self.table, self.dim, self.cfg.sigma)
        self.optimizer.zero_grad()
        self.theta.grad = torch.from_numpy(-grad.astype(np.float32))  # the optimizer descends; ES ascends
        self.optimizer.step()
        self.updates += 1
        return {"return_mean": float(returns.mean()), "return_max": float(returns.max()),
                "return_min": float(returns.min()), "grad_norm": float(np.linalg.norm(grad)),
                "param_norm": float(self.theta.detach().norm())}

    def policy_state(self) -> dict[str, torch.Tensor]:
        vector = self.theta.detach().numpy()
        return {name: torch.from_numpy(np.array(t)) for name, t in unflatten(vector, self.shapes).items()}

    def manifest(self) -> PolicyManifest:
        return self._manifest

    def state(self) -> dict:
        return {"theta": self.theta.detach().clone(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates}

    def load(self, state: dict) -> None:
        with torch.no_grad():
            self.theta.copy_(state["theta"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
