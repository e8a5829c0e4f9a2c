"""Log-probabilities, entropies and samples of each action head, in torch, for the learners' losses.

They mirror shared/policy/actors.py (numpy, the collectors' side) head for head: the behaviour log-prob a collector
records and the one a learner recomputes must describe the same distribution. Tests hold the two together.
"""

from __future__ import annotations

import math

import torch

from rlfleet.shared.payloads.spaces import BoxActions, MultiDiscreteActions, Spaces
from rlfleet.shared.policy.actors import LOG_STD_MAX, LOG_STD_MIN, SDE_EPS, TANH_EPS
from rlfleet.shared.policy.manifest import Head

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _categorical(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logp_all = torch.log_softmax(logits, dim=1)
    logp = logp_all.gather(1, actions.long()[:, None]).squeeze(1)
    p_logp = torch.where(logp_all.isfinite(), logp_all.exp() * logp_all, 0.0)  # a masked action adds nothing
    return logp, -p_logp.sum(1)


def legal(spaces: Spaces, obs: torch.Tensor) -> torch.Tensor | None:
    """[N, n] booleans from the observations' action mask (None: every action is legal); shared/policy/actors.py's
    `legal` in torch. A row allowing nothing (a finished game's last observation) allows everything."""
    columns = spaces.mask_slice
    if columns is None:
        return None
    mask = obs.reshape(len(obs), -1)[:, columns] > 0.5
    return mask | ~mask.any(dim=1, keepdim=True)


def masked(out: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Q-values or logits with illegal actions at -inf (as the actors see them)."""
    return out if mask is None else out.masked_fill(~mask, -math.inf)


def log_prob_entropy(head: Head, spaces: Spaces, out: torch.Tensor, log_std: torch.Tensor | None,
                     actions: torch.Tensor, obs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi(a|s), entropy) per row for the network outputs `out` of a stochastic head; under an action mask
    (from `obs`), of the distribution over legal actions the collectors drew from."""
    if head == "categorical":
        return _categorical(out if obs is None else masked(out, legal(spaces, obs)), actions)
    if head == "multi_categorical":
        assert isinstance(spaces.action, MultiDiscreteActions)
        parts = torch.split(out, list(spaces.action.nvec), dim=1)
        pairs = [_categorical(part, actions[:, i]) for i, part in enumerate(parts)]
        return sum(p for p, _ in pairs), sum(e for _, e in pairs)  # type: ignore[return-value]
    if head == "gaussian":
        assert log_std is not None
        log_std = log_std.expand_as(out)
        z = (actions - out) / log_std.exp()
        logp = (-0.5 * z.pow(2) - log_std - HALF_LOG_2PI).sum(1)
        return logp, (0.5 + HALF_LOG_2PI + log_std).sum(1)
    if head == "gaussian_sde":
        assert log_std is not None and isinstance(spaces.action, BoxActions)
        dim = spaces.action.dim
        # the latent's gradient reaches the network through the mean only, as in SB3 (learn_features=False)
        mean, latent = out[:, :dim], out[:, dim:].detach()
        std = (latent.pow(2) @ (2.0 * log_std).exp() + SDE_EPS).sqrt()
        z = (actions - mean) / std
        return (-0.5 * z.pow(2) - std.log() - HALF_LOG_2PI).sum(1), (0.5 + HALF_LOG_2PI + std.log()).sum(1)
    raise ValueError(f"no log-prob/entropy for head {head!r} (tanh_gaussian: use tanh_gaussian_sample)")


def tanh_gaussian_sample(out: torch.Tensor, generator: torch.Generator | None = None, share: tuple[int, int] = (0, 1)
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """A reparameterised draw a = tanh(u), u ~ N(mean, std), and its log-prob with the tanh correction.

    The noise is drawn on the CPU (from `generator`, a CPU generator, when given) and moved to `out`'s device:
    a learner on a GPU makes the draws it would make on the CPU, and one that checkpoints its generator
    resumes with the draws it would have made. `share` (index, count): `out` holds share `index` of `count` equal
    shares of a batch, as a rank of a learner group does; the noise of the whole batch is drawn and this share's
    rows taken, so the group draws what one learner on the whole batch draws."""
    dim = out.shape[1] // 2
    mean, log_std = out[:, :dim], out[:, dim:].clamp(LOG_STD_MIN, LOG_STD_MAX)
    std = log_std.exp()
    index, count = share
    rows = mean.shape[0]
    noise = torch.randn((count * rows, dim), generator=generator, dtype=mean.dtype)[index * rows:(index + 1) * rows]
    noise = noise.to(mean.device)
    actions = torch.tanh(mean + std * noise)
    logp = (-0.5 * noise.pow(2) - log_std - HALF_LOG_2PI - torch.log(1 - actions.pow(2) + TANH_EPS)).sum(1)
    return actions, logp
