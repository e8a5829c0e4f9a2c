"""SAC: a tanh-gaussian actor, twin critics with Polyak-averaged targets, and a tuned entropy coefficient.

One update follows Stable-Baselines3's order, so the two can be compared step for step:
1. draw a ~ pi(.|s) (reparameterised) and step the entropy coefficient: loss -log_alpha * (log pi(a|s) +
   target_entropy); the alpha used by the rest of this update is the one from before that step;
2. critics: y = R + discount * (min_i Q_target_i(s', a') - alpha * log pi(a'|s')), a' ~ pi(.|s'), where
   the batch's n-step return R and discount (gamma**k, or 0 after a termination) come from the chunk cache;
   loss 0.5 * sum_i (Q_i(s, a) - y)**2, each row scaled by its prioritized-replay importance weight;
3. actor: alpha * log pi(a|s) - min_i Q_i(s, a) with the critics just updated; its gradient reaches the actor
   only (the critics' own gradients from this loss would be thrown away, so they are not computed);
4. every `target_update_interval` updates, target <- target + tau * (online - target).

Random draws come from the learner's own CPU generator, which checkpoints carry: a resumed learner makes the
draws it would have made, and a GPU learner the draws a CPU one makes. `td_abs` is the mean of the two
critics' |TD errors|, the rows' new priorities.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.distributions import tanh_gaussian_sample
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.sac import SACParams
from rlfleet.shared.payloads.spaces import BoxActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest
from rlfleet.shared.policy.nets import Network, PolicyNet

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group

CPU = torch.device("cpu")


class SAC:
    def __init__(self, spaces: Spaces, cfg: SACParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        assert isinstance(spaces.action, BoxActions), "the registry gives sac Box action spaces only"
        torch.manual_seed(seed)
        self.cfg, self.device = cfg, device
        self._manifest = PolicyManifest.of(spaces, cfg.net, behaviour.head)
        encoder = self._manifest.encoder
        self.actor = PolicyNet(self._manifest).to(device)
        dim = spaces.action.dim

        def critics() -> nn.ModuleList:
            return nn.ModuleList(Network(spaces.obs, encoder, cfg.net, 1, extra_in=dim) for _ in range(2)).to(device)

        self.critics, self.targets = critics(), critics()
        self.targets.load_state_dict(self.critics.state_dict())
        self.targets.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor([math.log(cfg.ent_coef_init)], device=device))
        self.target_entropy = -float(dim) if cfg.target_entropy == "auto" else float(cfg.target_entropy)
        self.actor_params = list(self.actor.parameters())
        self.actor_optimizer = BackgroundOptimizer(torch.optim.Adam, self.actor_params, lr=cfg.learning_rate)
        self.critic_optimizer = BackgroundOptimizer(torch.optim.Adam, self.critics.parameters(),
                                                   lr=cfg.learning_rate)
        self.alpha_optimizer = BackgroundOptimizer(torch.optim.Adam, [self.log_alpha], lr=cfg.learning_rate)
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0
        self.td_abs: np.ndarray | None = np.zeros(0, np.float32)
        # The forward passes whose losses are trained: the networks, or their DistributedDataParallel wrappers in a
        # learner group (`join`), with this rank's share of every batch's noise.
        self.train_actor: nn.Module = self.actor
        self.train_critics: list[nn.Module] = list(self.critics)
        self.group: Group | None = None
        self.share = (0, 1)

    def join(self, group: Group) -> None:
        """Train as one rank of `group`, each rank on an equal share of the batch (shares: batch_size): the actor's
        and the critics' gradients are averaged by DistributedDataParallel, the temperature's by an all-reduce, and
        each rank draws the whole batch's noise and takes its own rows, so the group steps as one learner on the
        whole batch would. The actor's loss reads the critics unwrapped: only the actor is trained by it."""
        self.group, self.share = group, (group.rank, group.world_size)
        self.train_actor = group.wrap(self.actor)
        self.train_critics = [group.wrap(critic) for critic in self.critics]

    def _min_q(self, nets: nn.ModuleList, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        first, second = (net(obs, actions).squeeze(1) for net in nets)
        return torch.min(first, second)

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        obs, actions, returns, boot_obs, discount = (
            to_device(batch[k], self.device) for k in ("obs", "actions", "returns", "boot_obs", "discount"))

        actions_pi, logp_pi = tanh_gaussian_sample(self.train_actor(obs), self.generator, self.share)
        alpha = self.log_alpha.detach().exp()
        alpha_loss = -(self.log_alpha * (logp_pi.detach() + self.target_entropy)).mean()
        self.alpha_optimizer.zero_grad()
        alpha_loss.backward()
        if self.group is not None and self.log_alpha.grad is not None:
            self.log_alpha.grad.copy_(self.group.sum(self.log_alpha.grad) / self.group.world_size)
        self.alpha_optimizer.step()

        with torch.no_grad():
            next_actions, next_logp = tanh_gaussian_sample(self.actor(boot_obs), self.generator, self.share)
            next_q = self._min_q(self.targets, boot_obs, next_actions)
            target = returns + discount * (next_q - alpha * next_logp)
        q1, q2 = (critic(obs, actions).squeeze(1) for critic in self.train_critics)
        per_row = 0.5 * ((q1 - target).pow(2) + (q2 - target).pow(2))
        weights = batch.get("weights")
        critic_loss = (to_device(weights, self.device) * per_row).mean() if weights is not None else per_row.mean()
        self.td_abs = (0.5 * ((q1.detach() - target).abs() + (q2.detach() - target).abs())).float().cpu().numpy()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        actor_loss = (alpha * logp_pi - self._min_q(self.critics, obs, actions_pi)).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward(inputs=self.actor_params)
        self.actor_optimizer.step()

        self.updates += 1
        if self.updates % self.cfg.target_update_interval == 0:
            self.polyak()
        return {"critic_loss": critic_loss.item(), "actor_loss": actor_loss.item(), "alpha": alpha.item(),
                "alpha_loss": alpha_loss.item(), "entropy": -logp_pi.detach().mean().item(),
                "q_mean": 0.5 * (q1.detach().mean() + q2.detach().mean()).item()}

    @torch.no_grad()
    def polyak(self) -> None:
        """target <- target + tau * (online - target), i.e. (1 - tau) * target + tau * online."""
        torch._foreach_lerp_(list(self.targets.parameters()), list(self.critics.parameters()), self.cfg.tau)

    def policy_state(self) -> dict[str, torch.Tensor]:
        return self.actor.state_dict()

    def manifest(self) -> PolicyManifest:
        return self._manifest

    def state(self) -> dict:
        return {"actor": self.actor.state_dict(), "critics": self.critics.state_dict(),
                "targets": self.targets.state_dict(), "log_alpha": self.log_alpha.detach().clone(),
                "actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(),
                "alpha_optimizer": self.alpha_optimizer.state_dict(), "updates": self.updates,
                "generator": self.generator.get_state()}

    def load(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critics.load_state_dict(state["critics"])
        self.targets.load_state_dict(state["targets"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.updates = int(state["updates"])
        self.generator.set_state(state["generator"])
