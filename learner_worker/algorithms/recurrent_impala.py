"""recurrent_impala: V-trace (Espeholt et al. 2018) on a policy with a recurrent core, over whole env sequences.

Each chunk's env columns are unrolled from the core state the collector stored for their first row, the state
zeroed at every episode start inside the column (learner_worker/recurrent.py), the paper's way of training its
LSTM agents on stale trajectories. Every epoch takes one gradient step on the whole batch, as the memoryless
learner does:

1. Without gradient, the current networks give each row's value and, from the state after the row (the memory its
   env carried on), its next observation's value.
2. With gradient, the actor-critic is unrolled over every sequence from its stored state (truncated backprop
   through time over the chunk's length): log pi(a|s), entropies and the critic's outputs per row.
3. V-trace runs per env column on those values and the detached log-probabilities against the collectors'
   behaviour log-probabilities, and learner_worker/vtrace_step.py takes the step (the paper's policy gradient, or
   APPO's clipped surrogate with `clip_ratio`), so both V-trace learners share one loss.

Chunks of different lengths are padded after their rows; padding is never valid, ends the recursion, and, coming
after a column's real rows, never changes their states. A column's last real row ends its recursion, as a chunk's
last row always does. In a learner group each rank unrolls the chunks it took and the loss is the whole batch's
mean (ActorCritic.batch_mean): one step per epoch over all rows needs no equal shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU, clean
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.distributions import log_prob_entropy
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.learner_worker.recurrent import RecurrentActorCritic, episode_starts, padded
from rlfleet.learner_worker.vtrace import vtrace
from rlfleet.learner_worker.vtrace_step import VtraceRows, vtrace_step
from rlfleet.shared.algorithms.recurrent_impala import RecurrentImpalaParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


@dataclass(frozen=True)
class Columns:
    """Every env column of a batch's chunks side by side, [T, S, ...] numpy (padded to the longest chunk), and
    each column's stored first-row state [S, *state_shape]."""

    obs: np.ndarray
    next_obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    ends: np.ndarray
    valid: np.ndarray
    starts: np.ndarray
    state: np.ndarray

    @classmethod
    def of(cls, chunks: list[dict[str, np.ndarray]], spaces: Spaces) -> Columns:
        length = max(len(chunk["valid"]) for chunk in chunks)
        parts: dict[str, list[np.ndarray]] = {name: [] for name in cls.__dataclass_fields__ if name != "state"}
        for chunk in chunks:
            steps = clean(chunk, spaces)
            ends = steps.ends.copy()
            ends[-1] = True  # the column's last real row: padding after it must not feed its recursion
            own = {"obs": steps.obs, "next_obs": steps.next_obs, "actions": steps.actions, "logp": steps.logp,
                   "rewards": steps.rewards, "terminated": steps.terminated, "valid": steps.valid,
                   "starts": episode_starts(chunk)}
            for name, arr in own.items():
                parts[name].append(padded(arr, length))
            parts["ends"].append(np.concatenate([ends, np.ones((length - len(ends), ends.shape[1]), bool)]))
        return cls(**{name: np.concatenate(arrays, axis=1) for name, arrays in parts.items()},
                   state=np.concatenate([chunk["core_state"] for chunk in chunks]))


class RecurrentImpala(RecurrentActorCritic):
    def __init__(self, spaces: Spaces, cfg: RecurrentImpalaParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = BackgroundOptimizer(torch.optim.Adam, self.params, lr=cfg.learning_rate, eps=1e-5)

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg, dev = self.cfg, self.device
        cols = Columns.of(chunks, self.spaces)
        if not cols.valid.any():
            raise ValueError("update on an empty batch: no valid rows")
        shape = cols.valid.shape
        obs, next_obs = to_device(cols.obs, dev), to_device(cols.next_obs, dev)
        state, starts = to_device(cols.state, dev), to_device(cols.starts, dev)
        actions, behaviour_logp = to_device(cols.actions, dev), to_device(cols.logp, dev)
        keep = to_device(cols.valid.reshape(-1), dev)

        def flat(x: torch.Tensor) -> torch.Tensor:
            return x.reshape(-1, *x.shape[2:])

        def raw(x: torch.Tensor) -> np.ndarray:
            return self.codec.values(flat(x)).float().cpu().numpy().astype(np.float64).reshape(shape)

        sums: dict[str, float] = {}
        for _ in range(cfg.epochs):
            values, next_values, *_ = self.recurrent_model.values_and_next(obs, next_obs, state, starts)
            actor_out, critic_out, _ = self.train_model(obs, state, starts)
            logp, entropy = log_prob_entropy(self._manifest.head, self.spaces, flat(actor_out),
                                             getattr(self.actor, "log_std", None), flat(actions), flat(obs))
            target_logp = logp.detach().float().cpu().numpy().astype(np.float64).reshape(shape)
            targets, advantages = vtrace(cols.logp, target_logp, cols.rewards, raw(values), raw(next_values),
                                         cols.terminated, cols.ends, cfg.gamma, cfg.rho_bar, cfg.c_bar,
                                         cfg.vtrace_lambda)
            info = vtrace_step(self, cfg, VtraceRows(logp=logp, entropy=entropy, critic_out=flat(critic_out),
                                                     behaviour_logp=flat(behaviour_logp),
                                                     targets=targets.reshape(-1), advantages=advantages.reshape(-1),
                                                     keep=keep))
            for key, value in info.items():
                sums[key] = sums.get(key, 0.0) + value / cfg.epochs
        self.updates += 1
        return sums
