"""IMPALA (Espeholt et al. 2018): actor-critic on stale data, corrected by V-trace.

Its loss and step (the paper's policy gradient, or APPO's clipped surrogate with `clip_ratio`) are
learner_worker/vtrace_step.py's, shared with the recurrent learner; this module gets every row's quantities in one
forward pass. Where each quantity comes from, and why:

* Behaviour log-probs (`logp`) come from the collectors: with asynchronous collectors the actions were drawn
  by a policy some versions old, which the learner no longer holds.
* Target log-probs, values and next values come from the current actor and critic, in the same forward pass
  the loss differentiates; V-trace reads them detached (constants), so the gradient flows through
  log pi(a|s) in the policy term and through V(s) in the value term only.
* Invalid rows are zeroed and cut the recursion (learner_worker/actor_critic.py) and never enter a mean.

`epochs` > 1 takes several gradient steps on one batch, re-running V-trace with the updated networks before
each: the ratios then also measure how far this batch's own steps moved the policy. rho_bar caps each row's
weight but never takes it to zero, so the plain policy gradient keeps pushing each row's action the way its
advantage says, however far this batch's steps have moved it already. On LunarLander with 4 epochs that ran
away (KL(mu || pi) of 0.5-0.7 in an update, then returns fell from about 200 to -138; with 8 epochs, KL 6 and
a near-deterministic policy). The clipped surrogate is the trust region that lets several steps per batch,
cheaper than fetching a batch and publishing a policy on a small machine, hold. The paper takes one step per
batch (epochs = 1) and needs no clip.

`minibatch_size` takes one step per shuffled minibatch of the batch's valid rows instead of one on the whole batch
(as Sample Factory's APPO): each epoch runs V-trace once, from a forward pass without gradient, and its targets and
advantages then stay fixed for that epoch's minibatches, as GAE advantages do in a clipped-surrogate learner. The
clipped surrogate divides out the rho V-trace used, taken from that pass, not from the minibatch's own (by then
moved) log-probs. Full-batch steps learn too little per env step where a batch is thousands of rows
(configs/lunarlander_impala.yaml).
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU, ActorCritic, Steps, clean
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.minibatches import shuffled_minibatches
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.learner_worker.vtrace import vtrace
from rlfleet.learner_worker.vtrace_step import VtraceRows, vtrace_step
from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


class Impala(ActorCritic):
    def __init__(self, spaces: Spaces, cfg: ImpalaParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = BackgroundOptimizer(torch.optim.Adam, self.params, lr=cfg.learning_rate, eps=1e-5)

    def vtrace_targets(self, steps: list[Steps], target_logp: np.ndarray, values: np.ndarray,
                       next_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """V-trace chunk by chunk over flat per-row network outputs (all rows of every chunk, in order);
        returns flat (targets, advantages)."""
        cfg = self.cfg
        out_targets, out_advantages = [], []
        start = 0
        for s in steps:
            shape = s.rewards.shape
            rows = slice(start, start + s.rewards.size)
            targets, advantages = vtrace(s.logp, target_logp[rows].reshape(shape), s.rewards,
                                         values[rows].reshape(shape), next_values[rows].reshape(shape),
                                         s.terminated, s.ends, cfg.gamma, cfg.rho_bar, cfg.c_bar, cfg.vtrace_lambda)
            out_targets.append(s.flat(targets))
            out_advantages.append(s.flat(advantages))
            start = rows.stop
        return np.concatenate(out_targets), np.concatenate(out_advantages)

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        steps = [clean(c, self.spaces) for c in chunks]
        keep = to_device(np.concatenate([s.valid.reshape(-1) for s in steps]), self.device)
        if not keep.any():
            raise ValueError("update on an empty batch: no valid rows")

        def joined(name: str) -> torch.Tensor:
            return to_device(np.concatenate([s.flat(getattr(s, name)) for s in steps]), self.device)

        obs, next_obs, actions, behaviour_logp = joined("obs"), joined("next_obs"), joined("actions"), joined("logp")
        rows = len(obs)
        infos: list[dict[str, float]] = []
        size = cfg.minibatch_size  # None: the paper's one step on the whole batch, from the same forward pass
        for _ in range(cfg.epochs):
            with torch.set_grad_enabled(size is None):
                logp, entropy, both = self.evaluate(obs, actions, value_obs=next_obs)
            values = self.codec.values(both.detach()).float().cpu().numpy().astype(np.float64)
            target_logp = logp.detach().float().cpu().numpy().astype(np.float64)
            targets, advantages = self.vtrace_targets(steps, target_logp, values[:rows], values[rows:])
            if size is None:
                infos.append(vtrace_step(self, cfg, VtraceRows(
                    logp=logp, entropy=entropy, critic_out=both[:rows], behaviour_logp=behaviour_logp,
                    targets=targets, advantages=advantages, keep=keep)))
                continue
            valid = keep.nonzero().squeeze(1)
            for piece in shuffled_minibatches(len(valid), size, self.generator, self.group, self.device):
                idx = valid[piece]
                at = idx.cpu().numpy()
                logp, entropy, critic_out = self.evaluate(obs[idx], actions[idx])
                info = vtrace_step(self, cfg, VtraceRows(
                    logp=logp, entropy=entropy, critic_out=critic_out, behaviour_logp=behaviour_logp[idx],
                    targets=targets[at], advantages=advantages[at], keep=keep[idx], vtrace_logp=target_logp[at]))
                if len(idx):  # a group's rank with fewer rows than the group takes steps has none in some
                    infos.append(info)
        self.updates += 1
        return {key: sum(info[key] for info in infos) / len(infos) for key in infos[0]}
