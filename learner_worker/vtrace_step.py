"""One gradient step of a V-trace actor-critic (Espeholt et al. 2018), memoryless or recurrent.

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

`normalize_advantages` scales the advantages to mean 0 and std 1 over the step's rows (the batch, or the
minibatch where `minibatch_size` is set; every rank's rows in a learner group), as Sample Factory's APPO does: the
policy term's size then no longer follows the rewards' scale (LunarLander's run to +-100), and entropy_coef means
the same on every env.

The memoryless learner (one forward pass over rows) and the recurrent one (unrolled over env sequences from stored
core states) differ only in how they get each row's log-probabilities, entropies and values; from there this
module is the step both take, so their losses cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import ActorCritic
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.surrogate import LOG_RATIO_LIMIT, moments, normalized
from rlfleet.shared.algorithms.base import VtraceParams


@dataclass(frozen=True)
class VtraceRows:
    """One step's rows of a batch (an epoch's, or a minibatch's), flat in one order (invalid rows included, `keep`
    marks the rest): the current policy's log pi(a|s) and entropy and the critic's outputs for obs, all with
    gradient; the behaviour policy's log mu(a|s); V-trace's targets and advantages (computed from detached outputs
    of the networks as they were at the start of the epoch)."""

    logp: torch.Tensor
    entropy: torch.Tensor
    critic_out: torch.Tensor
    behaviour_logp: torch.Tensor
    targets: np.ndarray
    advantages: np.ndarray
    keep: torch.Tensor
    vtrace_logp: np.ndarray | None = None
    """The target log-probs V-trace computed its rho from, where they are not `logp`'s own values (a minibatch
    step after others on the same V-trace pass): the clipped surrogate takes back out the rho that is in the
    advantages."""


def vtrace_step(learner: ActorCritic, cfg: VtraceParams, rows: VtraceRows) -> dict[str, float]:
    """The gradient step on `rows` (module doc) and what it reports: the losses, `rho_clipped` (the fraction of
    valid rows whose ratio V-trace truncated) and `approx_kl` (a k3 estimate of KL(mu || pi))."""
    keep, logp, behaviour_logp = rows.keep, rows.logp, rows.behaviour_logp
    advantages = rows.advantages
    if cfg.clip_ratio is not None:
        target = logp.detach().double().cpu().numpy() if rows.vtrace_logp is None else rows.vtrace_logp
        log_ratio64 = target - behaviour_logp.double().cpu().numpy()  # as V-trace's
        advantages = without_rho(advantages, log_ratio64, cfg.rho_bar)
    adv = to_device(advantages.astype(np.float32), learner.device)[keep]
    if cfg.normalize_advantages:  # over the step's rows (the batch or a minibatch), every rank's in a group
        adv = normalized(adv, *moments(adv, learner.group)[1:])
    ratio = (None if cfg.clip_ratio is None else
             (logp[keep] - behaviour_logp[keep]).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT).exp())
    info = learner.policy_gradient_step(logp[keep], rows.entropy[keep], rows.critic_out[keep], adv,
                                        to_device(rows.targets.astype(np.float32), learner.device)[keep],
                                        cfg.value_coef, cfg.entropy_coef, cfg.max_grad_norm,
                                        ratio=ratio, clip_ratio=cfg.clip_ratio)
    log_ratio = (logp.detach()[keep] - behaviour_logp[keep]).double().clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    # Both log-probs are float32 sums from different code (numpy collectors, torch here): a ratio within 0.1% of
    # rho_bar is rounding, not truncation.
    info["rho_clipped"] = (log_ratio > np.log(cfg.rho_bar) + 1e-3).double().mean().item()
    info["approx_kl"] = (log_ratio.exp() - 1 - log_ratio).mean().item()
    return info


def without_rho(advantages: np.ndarray, log_ratio: np.ndarray, rho_bar: float) -> np.ndarray:
    """V-trace's advantages rho * (r + gamma * v' - V) with their truncated rho taken back out, for the clipped
    surrogate, whose own ratio pi/mu is the importance weight: weighting by both would count it twice (rho * ratio,
    the square of it on rows the policy has moved away from). rho is recomputed exactly as learner_worker/vtrace.py
    computes it; a rho that underflowed to 0 (a ratio below e^-745) leaves that row's advantage 0, as it was."""
    rho = np.exp(np.minimum(log_ratio, np.log(rho_bar)))
    return np.divide(advantages, rho, out=np.zeros_like(advantages), where=rho > 0)
