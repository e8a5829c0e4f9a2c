"""DQN: double Q-learning with a target network, Huber loss and n-step targets.

The batch already carries the n-step return and the bootstrap discount (gamma**k, or 0 after a
termination), so the update reads: target = R + discount * Q_target(s', argmax_a Q_online(s', a)).
With prioritized replay each row's Huber loss is scaled by its importance weight, and the absolute TD
errors of the batch are kept (`td_abs`) to be sent back as the rows' new priorities. With `value.transform:
pohlen` the network's Q-values live in h-space: the bootstrap is read back through h^-1, the target built in
raw units and trained as h(target) (h is increasing, so the greedy action collectors take is unchanged).
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
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group

CPU = torch.device("cpu")


class DQN:
    def __init__(self, spaces: Spaces, cfg: DQNParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.cfg, self.device, self.spaces = cfg, device, spaces
        self.nets = QNetworks(PolicyManifest.of(spaces, cfg.net, behaviour.head), cfg.learning_rate, device)
        self.train_online: nn.Module = self.nets.online  # its DistributedDataParallel wrapper in a learner group
        self.codec = ValueCodec(cfg.value)
        self.td_abs: np.ndarray | None = np.zeros(0, np.float32)

    def join(self, group: Group) -> None:
        """Train as one rank of `group`: the online network's gradients are averaged over the ranks. Each rank's
        loss is the mean over its equal share of the batch, and the importance weights are normalised by the
        whole buffer's minimum priority, so the average is the whole batch's gradient."""
        self.train_online = group.wrap(self.nets.online)

    def td_loss(self, batch: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the batch's loss, Q(s, a) detached, the targets) with the current networks."""
        obs, actions, returns, boot_obs, discount = (
            to_device(batch[k], self.device) for k in ("obs", "actions", "returns", "boot_obs", "discount"))
        actions = actions.long()
        q = self.train_online(obs).gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            mask = legal(self.spaces, boot_obs)  # bootstrap over the next state's legal actions only
            next_target = masked(self.nets.target(boot_obs), mask)
            if self.cfg.double_q:
                best = masked(self.nets.online(boot_obs), mask).argmax(dim=1, keepdim=True)
                next_q = next_target.gather(1, best).squeeze(1)
            else:
                next_q = next_target.max(dim=1).values
            target = self.codec.encode(returns + discount * self.codec.decode(next_q))
        per_row = F.smooth_l1_loss(q, target, reduction="none")
        weights = batch.get("weights")
        loss = (to_device(weights, self.device) * per_row).mean() if weights is not None else per_row.mean()
        return loss, q.detach(), target

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        loss, q, target = self.td_loss(batch)
        self.td_abs = (q - target).abs().float().cpu().numpy()
        grad_norm = self.nets.step(loss, self.cfg.max_grad_norm, self.cfg.target_update_every)
        return {"td_loss": loss.item(), "q_mean": self.codec.decode(q).mean().item(),
                "grad_norm": grad_norm}

    def policy_state(self) -> dict[str, torch.Tensor]:
        return self.nets.online.state_dict()

    def manifest(self) -> PolicyManifest:
        return self.nets.manifest

    def state(self) -> dict:
        return self.nets.state()

    def load(self, state: dict) -> None:
        self.nets.load(state)
