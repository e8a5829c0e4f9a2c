"""PPO: clipped surrogate objective, separate actor and critic, GAE targets computed by the learner.

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

Minibatches: each epoch shuffles the valid rows with the learner's own generator and splits them into runs of
`minibatch_size`. The last, shorter run is kept as its own minibatch; a single leftover row is merged into the
previous minibatch instead, because one row has no spread to normalise its advantage by. Advantages are
normalised per minibatch (mean 0, population std 1).
"""

from __future__ import annotations

import numpy as np
import torch

from learner_worker.actor_critic import CPU, LOG_RATIO_LIMIT, ActorCritic, explained_variance
from shared.algorithms.ppo import PPOParams
from shared.manifest import Behaviour
from shared.spaces import Spaces


class PPO(ActorCritic):
    def __init__(self, spaces: Spaces, cfg: PPOParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = torch.optim.Adam(self.params, lr=cfg.learning_rate, eps=1e-5)
        self.generator = torch.Generator().manual_seed(seed)  # minibatch shuffling only

    def _minibatches(self, rows: int) -> list[torch.Tensor]:
        perm = torch.randperm(rows, generator=self.generator).to(self.device)
        pieces = list(perm.split(self.cfg.minibatch_size))
        if len(pieces) > 1 and len(pieces[-1]) < 2:
            pieces[-2:] = [torch.cat(pieces[-2:])]
        return pieces

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        batch = self.gae_batch(chunks, cfg.gamma, cfg.gae_lambda)
        targets = batch["targets"]
        explained = explained_variance(targets, batch["values"])
        sums = dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"), 0.0)
        count = 0
        for _ in range(cfg.epochs):
            for idx in self._minibatches(len(targets)):
                obs = batch["obs"][idx]
                logp_new, entropy_rows = self.log_prob_entropy(obs, batch["actions"][idx])
                entropy = entropy_rows.mean()
                log_ratio = (logp_new - batch["logp"][idx]).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
                ratio = log_ratio.exp()
                adv = batch["advantages"][idx]
                if cfg.normalize_advantages:
                    adv = (adv - adv.mean()) / (adv.std(correction=0) + 1e-8)
                surrogate = torch.min(ratio * adv, ratio.clamp(1 - cfg.clip_range, 1 + cfg.clip_range) * adv)
                policy_loss = -surrogate.mean()
                value_loss = self.codec.loss(self.critic(obs), targets[idx]).mean()
                loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()
                with torch.no_grad():
                    sums["policy_loss"] += policy_loss.item()
                    sums["value_loss"] += value_loss.item()
                    sums["entropy"] += entropy.item()
                    sums["approx_kl"] += ((ratio - 1) - log_ratio).mean().item()  # k3 estimator of KL(mu || pi)
                    sums["clip_fraction"] += ((ratio - 1).abs() > cfg.clip_range).float().mean().item()
                    sums["grad_norm"] += grad_norm.item()
                count += 1
        self.updates += 1
        info = {k: v / count for k, v in sums.items()}
        info["explained_variance"] = explained
        return info

    def state(self) -> dict:
        return {**super().state(), "generator": self.generator.get_state()}

    def load(self, state: dict) -> None:
        super().load(state)
        if "generator" in state:  # the shuffling stream: without it a resumed run draws other minibatches
            self.generator.set_state(state["generator"])
