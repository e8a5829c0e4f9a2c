"""The online and target Q-networks of the value-based learners, with the optimizer that trains the online one and
the update count that decides when the target catches up.

Those learners differ in how they build a loss (single transitions, or whole sequences with burn-in) and agree on
everything this part owns: the published policy is the online network, a gradient step is clipped to
`max_grad_norm`, the target copies the online network every `target_update_every` updates, and a checkpoint holds
both networks, the optimizer and the count (the keys "online", "target", "optimizer", "updates", which earlier
checkpoints of those learners also use, so they still resume).
"""

from __future__ import annotations

import torch

from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.policy.manifest import PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet


class QNetworks:
    def __init__(self, manifest: PolicyManifest, learning_rate: float, device: torch.device) -> None:
        self.manifest = manifest
        self.online = PolicyNet(manifest).to(device)
        self.target = PolicyNet(manifest).to(device)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)
        self.optimizer = BackgroundOptimizer(torch.optim.Adam, self.online.parameters(), lr=learning_rate)
        self.updates = 0

    def step(self, loss: torch.Tensor, max_grad_norm: float, target_update_every: int) -> float:
        """One gradient step of the online network on `loss`, then the target's copy when it is due; returns the
        gradient norm before clipping."""
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.online.parameters(), max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        if self.updates % target_update_every == 0:
            self.target.load_state_dict(self.online.state_dict())
        return grad_norm.item()

    def state(self) -> dict:
        return {"online": self.online.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load(self, state: dict) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
