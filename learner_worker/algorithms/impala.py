"""IMPALA (Espeholt et al. 2018): actor-critic on stale data, corrected by V-trace.

    loss = policy term + value_coef * 0.5 * mean((V(s) - v)^2) - entropy_coef * mean(H(pi))

with the V-trace targets v and advantages A (which carry their truncated rho) from learner_worker/vtrace.py.
The policy term is the paper's -mean(A * log pi(a|s)), or with `clip_ratio` c the clipped surrogate of APPO
(Sample Factory's and RLlib's asynchronous PPO):

    -mean(min(r * A, clip(r, 1 - c, 1 + c) * A)),   r = pi(a|s) / mu(a|s)

r is the current policy's probability over the behaviour policy's, the one that acted; A keeps its rho, as both
APPOs keep it. On data one step old r ~ 1 and the gradient is the paper's; the clip only bites where the
policy has already moved away from mu on a row, which is what `epochs` > 1 does (below).

Where each quantity comes from, and why:

* Behaviour log-probs (`logp`) come from the collectors: with asynchronous collectors the actions were drawn
  by a policy some versions old, which the learner no longer holds.
* Target log-probs, values and next values come from the current actor and critic, in the same forward pass
  the loss differentiates; V-trace reads them detached (constants), so the gradient flows through
  log pi(a|s) in the policy term and through V(s) in the value term only.
* Invalid rows are zeroed and cut the recursion (learner_worker/actor_critic.py) and never enter a mean.

`epochs` > 1 takes several gradient steps on one batch, re-running V-trace with the updated networks before
each: the ratios then also measure how far this batch's own steps moved the policy, and rho_bar caps
each row's weight but never takes it to zero: the plain policy gradient keeps pushing each row's action the way
its advantage says, however far this batch's steps have moved it already. On LunarLander that ran away: returns rose to 160-218
and collapsed to about -138 with 4 epochs. The clipped surrogate bounds the move per batch (a trust region around
the behaviour policy), which is what lets a few steps per batch, cheaper than fetching a batch and publishing a
policy on a small machine, hold. The paper takes one step per batch (epochs = 1) and needs no clip.
"""

from __future__ import annotations

import numpy as np
import torch

from learner_worker.actor_critic import CPU, LOG_RATIO_LIMIT, ActorCritic, Steps, clean
from learner_worker.device import to_device
from learner_worker.optimizers import BackgroundOptimizer
from learner_worker.vtrace import vtrace
from shared.algorithms.impala import ImpalaParams
from shared.payloads.spaces import Spaces
from shared.policy.manifest import Behaviour


class Impala(ActorCritic):
    def __init__(self, spaces: Spaces, cfg: ImpalaParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = BackgroundOptimizer(torch.optim.Adam, self.params, lr=cfg.learning_rate, eps=1e-5)

    def vtrace_targets(self, steps: list[Steps], target_logp: np.ndarray, values: np.ndarray,
                       next_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """V-trace chunk by chunk over flat per-row network outputs (all rows of every chunk, in order);
        returns flat (targets, advantages)."""
        cfg = self.cfg
        out_targets, out_advantages = [], []
        start = 0
        for s in steps:
            shape = s.rewards.shape
            rows = slice(start, start + s.rewards.size)
            targets, advantages = vtrace(s.logp, target_logp[rows].reshape(shape), s.rewards,
                                         values[rows].reshape(shape), next_values[rows].reshape(shape),
                                         s.terminated, s.ends, cfg.gamma, cfg.rho_bar, cfg.c_bar, cfg.vtrace_lambda)
            out_targets.append(s.flat(targets))
            out_advantages.append(s.flat(advantages))
            start = rows.stop
        return np.concatenate(out_targets), np.concatenate(out_advantages)

    def normalized(self, advantages: torch.Tensor) -> torch.Tensor:
        """`advantages` with mean 0 and (population) std 1 over the whole batch: every rank's rows in a learner
        group, so each rank scales its share alike."""
        plain = advantages.detach().double()
        stats = torch.stack([plain.new_tensor(float(len(plain))), plain.sum(), plain.square().sum()])
        if self.group is not None:
            stats = self.group.sum(stats).to(plain.device)
        count, total, squares = stats
        mean = total / count
        std = (squares / count - mean.square()).clamp(min=0).sqrt()
        return (advantages - mean.to(advantages.dtype)) / (std.to(advantages.dtype) + 1e-8)

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        steps = [clean(c, self.spaces) for c in chunks]
        keep = to_device(np.concatenate([s.valid.reshape(-1) for s in steps]), self.device)
        if not keep.any():
            raise ValueError("update on an empty batch: no valid rows")

        def joined(name: str) -> torch.Tensor:
            return to_device(np.concatenate([s.flat(getattr(s, name)) for s in steps]), self.device)

        obs, next_obs, actions, behaviour_logp = joined("obs"), joined("next_obs"), joined("actions"), joined("logp")
        rows = len(obs)
        sums: dict[str, float] = {}
        for _ in range(cfg.epochs):
            logp, entropy, both = self.evaluate(obs, actions, value_obs=next_obs)
            values = self.codec.values(both.detach()).float().cpu().numpy().astype(np.float64)
            targets, advantages = self.vtrace_targets(steps, logp.detach().float().cpu().numpy().astype(np.float64),
                                                      values[:rows], values[rows:])
            adv = to_device(advantages.astype(np.float32), self.device)[keep]
            if cfg.normalize_advantages:
                adv = self.normalized(adv)
            ratio = (None if cfg.clip_ratio is None else
                     (logp[keep] - behaviour_logp[keep]).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT).exp())
            info = self.policy_gradient_step(logp[keep], entropy[keep], both[:rows][keep],
                                             adv, to_device(targets.astype(np.float32), self.device)[keep],
                                             cfg.value_coef, cfg.entropy_coef, cfg.max_grad_norm,
                                             ratio=ratio, clip_ratio=cfg.clip_ratio)
            log_ratio = (logp.detach()[keep] - behaviour_logp[keep]).double().clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
            # Both log-probs are float32 sums from different code (numpy collectors, torch here): a ratio within
            # 0.1% of rho_bar is rounding, not truncation.
            info["rho_clipped"] = (log_ratio > np.log(cfg.rho_bar) + 1e-3).double().mean().item()
            info["approx_kl"] = (log_ratio.exp() - 1 - log_ratio).mean().item()  # k3 estimate of KL(mu || pi)
            for key, value in info.items():
                sums[key] = sums.get(key, 0.0) + value / cfg.epochs
        self.updates += 1
        return sums
