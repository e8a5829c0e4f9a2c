"""The clipped surrogate objective (Schulman et al. 2017) over a minibatch of rows, alone or in a learner group.

Every learner that takes clipped importance-ratio steps on chunks uses it, memoryless or recurrent: the ratio of
the current policy to the collector's behaviour log-probabilities (never recomputed: with policy lag the behaviour
policy is one the learner no longer holds), advantages normalised per minibatch, and the means that make a learner
group's averaged gradient that of the whole minibatch.

In a learner group the minibatch is the union of every rank's rows: advantages are normalised with the moments of
all of them (all-reduced), and each mean is this rank's sum over the total row count times the world size, so
DistributedDataParallel's average of the ranks' gradients is the gradient of the whole minibatch's loss, whatever
each rank's share (even none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from rlfleet.learner_worker.actor_critic import LOG_RATIO_LIMIT

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group

Average = Callable[[torch.Tensor], torch.Tensor]


def clipped_surrogate(logp_new: torch.Tensor, logp_behaviour: torch.Tensor, advantages: torch.Tensor,
                      clip_range: float, normalize: bool, group: Group | None
                      ) -> tuple[torch.Tensor, Average, dict[str, torch.Tensor]]:
    """(policy loss with gradient, the minibatch mean every other loss term must use, detached terms for learn
    info: approx_kl and clip_fraction) over rows whose log pi(a|s) is `logp_new`."""
    log_ratio = (logp_new - logp_behaviour).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    ratio = log_ratio.exp()
    adv = advantages
    if group is None:
        if normalize:
            adv = (adv - adv.mean()) / (adv.std(correction=0) + 1e-8)

        def average(x: torch.Tensor) -> torch.Tensor:
            return x.mean()
    else:
        plain = adv.detach()
        rows, total, squares = group.sum(torch.stack([plain.new_tensor(float(len(adv))), plain.sum(),
                                                      plain.square().sum()]))
        if normalize:
            mean = total / rows
            std = (squares / rows - mean.square()).clamp(min=0).sqrt()
            adv = (adv - mean.to(adv.dtype)) / (std.to(adv.dtype) + 1e-8)
        scale = group.world_size / rows.item()

        def average(x: torch.Tensor) -> torch.Tensor:
            return x.sum() * scale
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - clip_range, 1 + clip_range) * adv)
    policy_loss = -average(surrogate)
    with torch.no_grad():
        terms = {"approx_kl": average((ratio - 1) - log_ratio),  # k3 estimator of KL(mu || pi)
                 "clip_fraction": average(((ratio - 1).abs() > clip_range).float())}
    return policy_loss, average, terms
