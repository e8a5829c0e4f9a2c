"""A2C: the advantage actor-critic of Mnih et al. 2016, synchronous: one gradient step on every batch.

    loss = -mean(A * log pi(a|s)) + value_coef * 0.5 * mean((V(s) - R)^2) - entropy_coef * mean(H(pi(.|s)))

A and R come from learner_worker/gae.py with the current critic (lambda = 1: n-step returns to the chunk's
end, bootstrapped there and at truncations). There is no importance ratio: the loss is only right for data
of the policy being trained, which is why A2C runs with force_sync (every chunk comes from the latest
policy). The behaviour log-prob the collectors record is therefore not read.
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU, ActorCritic
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.a2c import A2CParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


class A2C(ActorCritic):
    def __init__(self, spaces: Spaces, cfg: A2CParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = BackgroundOptimizer(torch.optim.RMSprop, self.params, lr=cfg.learning_rate,
                                             alpha=cfg.rmsprop_alpha, eps=cfg.rmsprop_eps)

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        batch = self.gae_batch(chunks, cfg.gamma, cfg.gae_lambda)
        logp, entropy, critic_out = self.evaluate(batch["obs"], batch["actions"])
        info = self.policy_gradient_step(logp, entropy, critic_out, batch["advantages"],
                                         batch["targets"], cfg.value_coef, cfg.entropy_coef, cfg.max_grad_norm)
        self.updates += 1
        return info
