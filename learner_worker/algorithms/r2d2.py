"""r2d2: recurrent double Q-learning over replayed sequences (Kapturowski et al., 2019).

A batch is B sequences of L rows, each with its column's rows from the chunk's first row (learner_worker/
sequences.py). Burn-in: the online network is unrolled without gradient from the chunk's stored state over every row
before a sequence, and the sequence starts from the state it reaches; so is the target network, from the same
stored state, over the rows the targets read. Only the sequence's own L rows are unrolled with gradient, so no
gradient reaches the burn-in rows, as in the paper.

Targets: the n-step return of each row (from the chunk's columns, cut at episode ends) plus the discounted value
of its bootstrap row's next observation, read from the state after that row (the memory the env carried into it):
double Q (the online network picks the action, the target network values it), through Pohlen's h with
`value.transform: pohlen` (the network's Q-values live in h-space: the bootstrap is read back through h^-1 and the
target trained as h(R + gamma^n h^-1(Q))). The loss is the Huber loss on the h-space TD errors of each sequence's
trained rows, averaged per sequence, then over sequences with the prioritized-replay importance weights. Each
sequence's new priority is eta * max + (1 - eta) * mean of its rows' |TD| (the paper's mixture: a mean alone
washes out the one surprising step of a long sequence, a max alone keeps sampling it forever); a sequence with no
trained row (all of it inside the burn-in) gets 0, and the coordinator's priority_epsilon keeps it just sampleable.

Learner groups: each rank samples an equal share of the batch's sequences (the registry entry's `shares`) and
trains them through `SequenceQ`, the pass with gradient as one module, which the group wraps in
DistributedDataParallel (the burn-in and target unrolls have no gradient and need no wrapper). A sequence's loss is
already a mean over its own trained rows, so the batch's loss is the importance-weighted sum over sequences divided
by the number of sequences with a trained row; in a group that number is the whole group's (summed over the ranks),
and each rank's sum is scaled by the world size, so the ranks' average is the whole batch's loss exactly, however
the sequences without a trained row fall among them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.distributions import legal, masked
from rlfleet.learner_worker.q_networks import QNetworks
from rlfleet.learner_worker.value_transform import ValueCodec
from rlfleet.shared.algorithms.r2d2 import R2D2Params
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group

CPU = torch.device("cpu")


def sequence_priority(td_abs: torch.Tensor, trained: torch.Tensor, eta: float) -> torch.Tensor:
    """[L, B] |TD| and trained-row flags -> [B] priorities: eta * max + (1 - eta) * mean over the trained rows
    (0 for a sequence without one)."""
    td = torch.where(trained, td_abs, torch.zeros_like(td_abs))
    count = trained.sum(dim=0)
    mean = td.sum(dim=0) / count.clamp(min=1)
    return eta * td.max(dim=0).values + (1 - eta) * mean


def bootstrap_targets(codec: ValueCodec, returns: torch.Tensor, discount: torch.Tensor, q_target: torch.Tensor,
                      q_online: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Double-Q n-step targets in the network's value space: encode(returns + discount * decode(q_target[a*])),
    a* the online network's best legal action; q_* [..., A] at each row's bootstrap, returns and discount [...]."""
    best = masked(q_online, mask).argmax(dim=-1, keepdim=True)
    next_q = q_target.gather(-1, best).squeeze(-1)
    return codec.encode(returns + discount * codec.decode(next_q))


def unroll(net: PolicyNet, obs: torch.Tensor, next_obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(the state after every row [T, B, *S], the Q-values of every row's next observation from that state
    [T, B, A]) from `state` [B, *S] over `obs` [T, B, *obs] with start flags [T, B]."""
    assert net.core is not None
    steps, size = starts.shape
    _, after = net.core.states(net.core_input(obs), state, starts)
    flat_obs = next_obs.reshape(steps * size, *next_obs.shape[2:])
    q_next, _ = net.step(flat_obs, after.reshape(steps * size, *after.shape[2:]))
    return after, q_next.reshape(steps, size, -1)


class SequenceQ(nn.Module):
    """The trained pass: the online network's Q-values along sequences from their starting states."""

    def __init__(self, net: PolicyNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.net.sequence_hidden(obs, state, starts)
        return self.net.head(hidden)


class R2D2:
    def __init__(self, spaces: Spaces, cfg: R2D2Params, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.cfg, self.device, self.spaces = cfg, device, spaces
        self.nets = QNetworks(PolicyManifest.of(spaces, cfg.net, behaviour.head), cfg.learning_rate, device)
        self.codec = ValueCodec(cfg.value)
        self.td_abs: np.ndarray | None = np.zeros(0, np.float32)
        self.group: Group | None = None
        self.train_q: nn.Module = SequenceQ(self.nets.online)  # its DistributedDataParallel wrapper in a group

    def join(self, group: Group) -> None:
        """Train as one rank of `group` (module doc)."""
        self.group = group
        self.train_q = group.wrap(SequenceQ(self.nets.online))

    def td_loss(self, batch: dict[str, np.ndarray]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the batch's loss, Q(s, a) of the sequences' rows detached, their targets, which rows are trained), the
        last three [L, B], with the current networks."""
        obs, next_obs, starts, state, first, actions, returns, boot, discount, trained, weights = (
            to_device(batch[k], self.device) for k in ("obs", "next_obs", "starts", "state", "first", "actions",
                                                       "returns", "boot", "discount", "trained", "weights"))
        length, size = trained.shape
        cols = torch.arange(size, device=self.device)[None, :]
        rows = first[None, :] + torch.arange(length, device=self.device)[:, None]
        with torch.no_grad():  # the burn-in: no gradient reaches the rows before a sequence
            after, online_next = unroll(self.nets.online, obs, next_obs, state, starts)
            _, target_next = unroll(self.nets.target, obs, next_obs, state, starts)
            boot_obs = next_obs[boot, cols]
            mask = legal(self.spaces, boot_obs.reshape(length * size, *boot_obs.shape[2:]))
            legal_boot = None if mask is None else mask.reshape(length, size, -1)
            target = bootstrap_targets(self.codec, returns, discount, target_next[boot, cols], online_next[boot, cols],
                                       legal_boot)
            begun = (first > 0).reshape(size, *([1] * (state.ndim - 1)))
            begin = torch.where(begun, after[(first - 1).clamp(min=0), cols[0]], state)
        q = self.train_q(obs[rows, cols], begin, starts[rows, cols]).gather(-1, actions.long()[..., None]).squeeze(-1)
        per_row = torch.where(trained, F.smooth_l1_loss(q, target, reduction="none"), torch.zeros_like(q))
        count = trained.sum(dim=0)
        per_sequence = per_row.sum(dim=0) / count.clamp(min=1)
        sequences = (count > 0).sum().reshape(1)
        world = 1
        if self.group is not None:  # the group's count, each rank's sum times the world size (module doc)
            sequences, world = self.group.sum(sequences), self.group.world_size
        loss = world * (weights * per_sequence).sum() / max(sequences.item(), 1)
        return loss, q.detach(), target, trained

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        loss, q, target, trained = self.td_loss(batch)
        self.td_abs = sequence_priority((q - target).abs(), trained, self.cfg.priority_eta).float().cpu().numpy()
        grad_norm = self.nets.step(loss, self.cfg.max_grad_norm, self.cfg.target_update_every)
        rows = int(trained.sum().item())
        q_mean = self.codec.decode(q[trained]).mean().item() if rows else 0.0
        return {"td_loss": loss.item(), "q_mean": q_mean, "grad_norm": grad_norm, "trained_rows": float(rows)}

    def policy_state(self) -> dict[str, torch.Tensor]:
        return self.nets.online.state_dict()

    def manifest(self) -> PolicyManifest:
        return self.nets.manifest

    def state(self) -> dict:
        return self.nets.state()

    def load(self, state: dict) -> None:
        self.nets.load(state)
