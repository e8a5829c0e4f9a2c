"""PPO: clipped surrogate objective, actor and critic (separate or on a shared trunk), GAE targets by the learner.

The actor's head follows the action space (categorical, multi-categorical, or gaussian with a
state-independent log-std); the loss is the same for all of them, through learner_worker/distributions.py.

Where each quantity comes from, and why:

* Behaviour log-probabilities (`logp`) come from the collector. The importance ratio pi_new(a|s) / mu(a|s)
  must divide by the distribution that actually drew the action. With policy lag the collector acted with a
  policy version the learner has already moved past and no longer holds, so the learner cannot recompute mu;
  recomputing it under its current weights would make every ratio start at 1 and silently treat stale data as
  on-policy, so neither the correction nor the clipping would see how far the policy has moved since then.
* Values and next values are recomputed here with the current critic, not shipped by collectors. Collectors
  only hold the published actor (the critic is never published), and even if they held a critic, with policy
  lag the learner's critic is the fresher one; recomputing also keeps payloads small. The critic is evaluated
  once per update, before any gradient step, and its outputs stay fixed for all epochs (standard PPO).

Invalid steps never reach the loss and cut the GAE recursion on both sides (learner_worker/actor_critic.py).

Minibatches: each epoch shuffles the valid rows into runs of `minibatch_size` (learner_worker/minibatches.py).
Advantages are normalised per minibatch (mean 0, population std 1); in a learner group a minibatch is every rank's
share of it together (`minibatch_loss`).
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU, ActorCritic, explained_variance
from rlfleet.learner_worker.minibatches import shuffled_minibatches
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.learner_worker.surrogate import clipped_surrogate
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


class PPO(ActorCritic):
    def __init__(self, spaces: Spaces, cfg: PPOParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = BackgroundOptimizer(torch.optim.Adam, self.params, lr=cfg.learning_rate, eps=1e-5)

    def minibatch_loss(self, batch: dict[str, torch.Tensor],
                       idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of rows `idx` of `batch` and its terms (detached, for learn info); in a learner group the
        minibatch is the union of every rank's rows `idx` (learner_worker/surrogate.py)."""
        cfg = self.cfg
        obs = batch["obs"][idx]
        logp_new, entropy_rows, critic_out = self.evaluate(obs, batch["actions"][idx])
        policy_loss, average, terms = clipped_surrogate(logp_new, batch["logp"][idx], batch["advantages"][idx],
                                                        cfg.clip_range, cfg.normalize_advantages, self.group)
        value_loss = average(self.codec.loss(critic_out, batch["targets"][idx]))
        entropy = average(entropy_rows)
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        return loss, {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
                      "entropy": entropy.detach(), **terms}

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        batch = self.gae_batch(chunks, cfg.gamma, cfg.gae_lambda)
        explained = explained_variance(batch["targets"], batch["values"])
        sums = dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"), 0.0)
        count = 0
        for _ in range(cfg.epochs):
            for idx in shuffled_minibatches(len(batch["targets"]), cfg.minibatch_size, self.generator, self.group,
                                            self.device):
                loss, terms = self.minibatch_loss(batch, idx)
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()
                for name, value in terms.items():
                    sums[name] += value.item()
                sums["grad_norm"] += grad_norm.item()
                count += 1
        self.updates += 1
        info = {k: v / count for k, v in sums.items()}
        info["explained_variance"] = explained
        return info
