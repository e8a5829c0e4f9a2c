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

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group

Average = Callable[[torch.Tensor], torch.Tensor]
LOG_RATIO_LIMIT = 20.0  # exp(88) overflows float32: a wildly stale logp must not turn the loss into inf/NaN


def clipped_objective(ratio: torch.Tensor, advantages: torch.Tensor, clip_range: float
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, min(ratio * A, clip(ratio, 1 - c, 1 + c) * A) (to be maximised), and whether the row's ratio has
    left the clip range (its share is the reported `clip_fraction`). Its gradient is ratio * A * grad log pi while
    the ratio is inside the range and nothing once it has left it in the direction A pushes: several steps on one
    batch cannot move the policy on a row further than the range from the one that acted there."""
    clipped = ratio.clamp(1 - clip_range, 1 + clip_range)
    return torch.min(ratio * advantages, clipped * advantages), (ratio.detach() - 1).abs() > clip_range


def moments(advantages: torch.Tensor, group: Group | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row count, mean, population std) of `advantages` over this learner's rows, or every rank's in a group
    (one all-reduce), to normalise them alike on every rank."""
    plain = advantages.detach().double()
    stats = torch.stack([plain.new_tensor(float(len(plain))), plain.sum(), plain.square().sum()])
    if group is not None:
        stats = group.sum(stats).to(plain.device)
    rows, total, squares = stats
    mean = total / rows
    return rows, mean, (squares / rows - mean.square()).clamp(min=0).sqrt()


def normalized(advantages: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return (advantages - mean.to(advantages.dtype)) / (std.to(advantages.dtype) + 1e-8)


def clipped_surrogate(logp_new: torch.Tensor, logp_behaviour: torch.Tensor, advantages: torch.Tensor,
                      clip_range: float, normalize: bool, group: Group | None
                      ) -> tuple[torch.Tensor, Average, dict[str, torch.Tensor]]:
    """(policy loss with gradient, the minibatch mean every other loss term must use, detached terms for learn
    info: approx_kl and clip_fraction) over rows whose log pi(a|s) is `logp_new`."""
    log_ratio = (logp_new - logp_behaviour).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    ratio = log_ratio.exp()
    rows, mean, std = moments(advantages, group)
    adv = normalized(advantages, mean, std) if normalize else advantages
    if group is None:

        def average(x: torch.Tensor) -> torch.Tensor:
            return x.mean()
    else:
        scale = group.world_size / rows.item()

        def average(x: torch.Tensor) -> torch.Tensor:
            return x.sum() * scale
    surrogate, clipped = clipped_objective(ratio, adv, clip_range)
    policy_loss = -average(surrogate)
    with torch.no_grad():
        terms = {"approx_kl": average((ratio - 1) - log_ratio),  # k3 estimator of KL(mu || pi)
                 "clip_fraction": average(clipped.float())}
    return policy_loss, average, terms
