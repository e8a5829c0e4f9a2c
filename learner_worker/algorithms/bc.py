"""Behavioural cloning: maximise the log-likelihood of the recorded actions under the policy's head.

The loss is -log pi(a|s) with the same distributions the collectors act with (learner_worker/distributions.py):
a categorical over discrete actions, one per sub-action for MultiDiscrete, a gaussian with a learned
state-independent log-std for Box. `evaluate` scores held-out transitions without a gradient: the same loss,
and how often the greedy action is the recorded one (discrete heads) or how far the gaussian's mean is from it.
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.distributions import log_prob_entropy
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.bc import BCParams
from rlfleet.shared.payloads.spaces import MultiDiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet


class BC:
    td_abs = None  # no priorities: nothing is sampled by priority
    policy = True  # each epoch's policy is published, for the evaluator to judge in the env
    columns = ("obs", "actions")  # what imitation needs of a recorded step

    def __init__(self, spaces: Spaces, cfg: BCParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.spaces, self.cfg, self.device = spaces, cfg, device
        self._manifest = PolicyManifest.of(spaces, cfg.net, behaviour.head)
        self.net = PolicyNet(self._manifest).to(device)
        self.optimizer = BackgroundOptimizer(torch.optim.AdamW, self.net.parameters(), lr=cfg.learning_rate,
                                             weight_decay=cfg.weight_decay)

    def _outputs(self, batch: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(network outputs, actions, log-likelihood per row)."""
        obs, actions = to_device(batch["obs"], self.device), to_device(batch["actions"], self.device)
        out = self.net(obs)
        logp, _ = log_prob_entropy(self._manifest.head, self.spaces, out, getattr(self.net, "log_std", None),
                                   actions, obs)
        return out, actions, logp

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        self.net.train()
        out, actions, logp = self._outputs(batch)
        loss = -logp.mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"nll": float(loss.detach())} | self._agreement(out.detach(), actions)

    @torch.no_grad()
    def evaluate(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """Loss and agreement on held-out transitions, as `valid_*`."""
        self.net.eval()
        out, actions, logp = self._outputs(batch)
        return {"valid_nll": float(-logp.mean())} | {f"valid_{k}": v for k, v in self._agreement(out, actions).items()}

    def _agreement(self, out: torch.Tensor, actions: torch.Tensor) -> dict[str, float]:
        """Accuracy of the greedy action for discrete heads (every sub-action right for MultiDiscrete); the
        gaussian mean's squared error for Box."""
        head = self._manifest.head
        if head == "categorical":
            return {"accuracy": float((out.argmax(1) == actions.long()).float().mean())}
        if head == "multi_categorical":
            assert isinstance(self.spaces.action, MultiDiscreteActions)
            parts = torch.split(out, list(self.spaces.action.nvec), dim=1)
            hits = torch.stack([p.argmax(1) == actions[:, i].long() for i, p in enumerate(parts)], 1)
            return {"accuracy": float(hits.all(1).float().mean())}
        return {"action_mse": float((out - actions).pow(2).sum(1).mean())}

    def policy_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.net.state_dict().items()}

    def manifest(self) -> PolicyManifest:
        return self._manifest

    def state(self) -> dict:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
