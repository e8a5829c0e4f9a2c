"""IMPALA (Espeholt et al. 2018): actor-critic on stale data, corrected by V-trace.

    loss = policy term + value_coef * 0.5 * mean((V(s) - v)^2) - entropy_coef * mean(H(pi))

with the V-trace targets v and advantages A = rho * (r + gamma * v' - V) from learner_worker/vtrace.py. The policy
term is the paper's -mean(A * log pi(a|s)), or with `clip_ratio` c the clipped surrogate of APPO (the
asynchronous proximal policy optimisation of Sample Factory and RLlib):

    -mean(min(ratio * q, clip(ratio, 1 - c, 1 + c) * q)),   ratio = pi(a|s) / mu(a|s),   q = A / rho

ratio is the current policy's probability over the behaviour policy's, the one that acted, and it is the
importance weight: q is A without V-trace's rho. While no row is clipped and every ratio is at most rho_bar the
gradient is then exactly the paper's, rho * q * grad log pi with rho = ratio; the clip only adds the trust region.
(Both APPOs keep rho in A, which weights a row by rho * ratio: the square of its ratio on rows the policy has
moved away from.)

Where each quantity comes from, and why:

* Behaviour log-probs (`logp`) come from the collectors: with asynchronous collectors the actions were drawn
  by a policy some versions old, which the learner no longer holds.
* Target log-probs, values and next values come from the current actor and critic, in the same forward pass
  the loss differentiates; V-trace reads them detached (constants), so the gradient flows through
  log pi(a|s) in the policy term and through V(s) in the value term only.
* Invalid rows are zeroed and cut the recursion (learner_worker/actor_critic.py) and never enter a mean.

`epochs` > 1 takes several gradient steps on one batch, re-running V-trace with the updated networks before
each: the ratios then also measure how far this batch's own steps moved the policy. rho_bar caps each row's
weight but never takes it to zero, so the plain policy gradient keeps pushing each row's action the way its
advantage says, however far this batch's steps have moved it already. On LunarLander with 4 epochs that ran
away (KL(mu || pi) of 0.5-0.7 in an update, then returns fell from about 200 to -138; with 8 epochs, KL 6 and
a near-deterministic policy). The clipped surrogate is the trust region that lets several steps per batch,
cheaper than fetching a batch and publishing a policy on a small machine, hold. The paper takes one step per
batch (epochs = 1) and needs no clip.

`normalize_advantages` scales the advantages to mean 0 and std 1 over the batch (every rank's rows in a learner
group), as Sample Factory's APPO does: the policy term's size then no longer follows the rewards' scale
(LunarLander's run to +-100), and entropy_coef means the same on every env.
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU, ActorCritic, Steps, clean
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.learner_worker.surrogate import LOG_RATIO_LIMIT, moments, normalized
from rlfleet.learner_worker.vtrace import vtrace
from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


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
        behaviour_log64 = np.concatenate([s.flat(s.logp) for s in steps]).astype(np.float64)
        sums: dict[str, float] = {}
        for _ in range(cfg.epochs):
            logp, entropy, both = self.evaluate(obs, actions, value_obs=next_obs)
            values = self.codec.values(both.detach()).float().cpu().numpy().astype(np.float64)
            target_logp = logp.detach().float().cpu().numpy().astype(np.float64)
            targets, advantages = self.vtrace_targets(steps, target_logp, values[:rows], values[rows:])
            if cfg.clip_ratio is not None:
                advantages = without_rho(advantages, target_logp - behaviour_log64, cfg.rho_bar)
            adv = to_device(advantages.astype(np.float32), self.device)[keep]
            if cfg.normalize_advantages:  # over the whole batch: every rank's rows in a learner group
                adv = normalized(adv, *moments(adv, self.group)[1:])
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


def without_rho(advantages: np.ndarray, log_ratio: np.ndarray, rho_bar: float) -> np.ndarray:
    """V-trace's advantages rho * (r + gamma * v' - V) with their truncated rho taken back out, for the clipped
    surrogate, whose own ratio pi/mu is the importance weight: weighting by both would count it twice (rho * ratio,
    the square of it on rows the policy has moved away from). rho is recomputed exactly as learner_worker/vtrace.py
    computes it; a rho that underflowed to 0 (a ratio below e^-745) leaves that row's advantage 0, as it was."""
    rho = np.exp(np.minimum(log_ratio, np.log(rho_bar)))
    return np.divide(advantages, rho, out=np.zeros_like(advantages), where=rho > 0)
