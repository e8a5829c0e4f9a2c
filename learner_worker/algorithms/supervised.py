"""The supervised trainer: a model of one dataset column given others, fitted by MSE or cross-entropy.

Columns become features the way a model of experience wants them: observations flattened, discrete actions
one-hot (one block per sub-action for MultiDiscrete), scalars as one feature. A class-valued target (discrete
actions, `terminated`) is classified with cross-entropy; anything else is regressed with MSE on its features.
`evaluate` reports the valid split's loss and the accuracy (classification) or the share of the target's
variance the model explains, R^2 (regression). The model file is safetensors whose metadata says what it maps
to what, so it can be used without rlfleet's config.
"""

from __future__ import annotations

import json

import numpy as np
import torch
from torch import nn

from rlfleet.learner_worker.actor_critic import CPU
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.supervised import SupervisedParams
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, MultiDiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.policy.nets import mlp

MODEL_KEY = "rlfleet.model"


class Supervised:
    td_abs = None
    policy = False  # it publishes no policy (so has no policy_state or manifest): model_file is saved per epoch

    def __init__(self, spaces: Spaces, cfg: SupervisedParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.spaces, self.cfg, self.device = spaces, cfg, device
        self.columns = (*cfg.inputs, cfg.target)
        self.classes = self._classes() if cfg.loss == "cross_entropy" else 0
        self.in_dim = sum(self._width(c) for c in cfg.inputs)
        self.out_dim = self.classes or self._width(cfg.target)
        self.model = mlp(self.in_dim, self.out_dim, cfg.net).to(device)
        self.optimizer = BackgroundOptimizer(torch.optim.AdamW, self.model.parameters(), lr=cfg.learning_rate,
                                             weight_decay=cfg.weight_decay)

    # ----- features -----------------------------------------------------------------------------------------
    def _width(self, column: str) -> int:
        if column in ("obs", "next_obs"):
            return self.spaces.obs.flat_size
        if column == "actions":
            action = self.spaces.action
            if isinstance(action, DiscreteActions):
                return action.n
            if isinstance(action, MultiDiscreteActions):
                return sum(action.nvec)
            assert isinstance(action, BoxActions)
            return len(action.low)
        return 1  # rewards, terminated

    def _classes(self) -> int:
        if self.cfg.target == "terminated":
            return 2
        action = self.spaces.action
        if not isinstance(action, DiscreteActions):
            raise ValueError(f"cross-entropy on actions needs discrete actions, not {action.kind}")
        return action.n

    def _encode(self, column: str, values: np.ndarray) -> np.ndarray:
        rows = len(values)
        if column == "actions" and isinstance(self.spaces.action, DiscreteActions):
            return np.eye(self.spaces.action.n, dtype=np.float32)[values.astype(np.int64)]
        if column == "actions" and isinstance(self.spaces.action, MultiDiscreteActions):
            return np.concatenate([np.eye(n, dtype=np.float32)[values[:, i].astype(np.int64)]
                                   for i, n in enumerate(self.spaces.action.nvec)], axis=1)
        return np.asarray(values, np.float32).reshape(rows, -1)

    def _tensors(self, batch: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        x = np.concatenate([self._encode(c, batch[c]) for c in self.cfg.inputs], axis=1)
        target = batch[self.cfg.target]
        y = target.astype(np.int64).reshape(-1) if self.classes else self._encode(self.cfg.target, target)
        return to_device(x, self.device), to_device(y, self.device)

    # ----- training ---------------------------------------------------------------------------------------
    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.classes:
            return nn.functional.cross_entropy(out, y)
        return (out - y).pow(2).sum(1).mean()

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        self.model.train()
        x, y = self._tensors(batch)
        loss = self._loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": float(loss.detach())}

    @torch.no_grad()
    def evaluate(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        self.model.eval()
        x, y = self._tensors(batch)
        out = self.model(x)
        scores = {"valid_loss": float(self._loss(out, y))}
        if self.classes:
            scores["valid_accuracy"] = float((out.argmax(1) == y).float().mean())
        else:
            spread = float((y - y.mean(0)).pow(2).sum())
            if spread > 0:  # R^2 of a constant target says nothing
                scores["valid_r2"] = 1.0 - float((out - y).pow(2).sum()) / spread
        return scores

    # ----- the saved model ---------------------------------------------------------------------------------
    def model_file(self) -> bytes:
        """The model as safetensors, its metadata saying what it maps to what."""
        from safetensors.torch import save

        about = {"inputs": list(self.cfg.inputs), "target": self.cfg.target, "loss": self.cfg.loss,
                 "input_dim": self.in_dim, "output_dim": self.out_dim, "net": self.cfg.net.model_dump(mode="json"),
                 "spaces": self.spaces.model_dump(mode="json"),
                 "encoding": "inputs side by side: observations flattened, discrete actions one-hot"}
        return save({k: v.detach().contiguous().cpu() for k, v in self.model.state_dict().items()},
                    metadata={MODEL_KEY: json.dumps(about, sort_keys=True)})

    def state(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
