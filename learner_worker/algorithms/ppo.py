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

Invalid steps (`valid=False`, the env raised) never reach the loss. Their rows are zeroed before any network
sees them, so garbage there (NaN, out-of-range actions) cannot leak through NaN * 0, and they cut the GAE
recursion on both sides: an invalid step is an episode end, and so is the valid step just before it, whose
advantage is then its one-step TD error bootstrapped from its own (real) next observation instead of reading
the invalid step's advantage.

Minibatches: each epoch shuffles the valid rows with the learner's own generator and splits them into runs of
`minibatch_size`. The last, shorter run is kept as its own minibatch; a single leftover row is merged into the
previous minibatch instead, because one row has no spread to normalise its advantage by. Advantages are
normalised per minibatch (mean 0, population std 1).
"""

from __future__ import annotations

import numpy as np
import torch

from learner_worker.device import to_device
from learner_worker.distributions import log_prob_entropy
from learner_worker.gae import gae
from shared.algorithms.ppo import PPOParams
from shared.manifest import Behaviour, PolicyManifest, default_encoder
from shared.nets import Network, PolicyNet
from shared.spaces import DiscreteActions, MultiDiscreteActions, Spaces

CPU = torch.device("cpu")
LOG_RATIO_LIMIT = 20.0  # exp(88) overflows float32: a wildly stale logp must not turn the loss into inf/NaN


def valid_rows(chunk: dict[str, np.ndarray]) -> np.ndarray:
    """The chunk's `valid` flags, [T, N]; the reader already checked every column against the schema."""
    valid = np.asarray(chunk["valid"], bool)
    if valid.ndim != 2:
        raise ValueError(f"valid must be [T, N], got shape {valid.shape}")
    return valid


def masked(arr: np.ndarray, valid: np.ndarray, fill: float | int = 0) -> np.ndarray:
    """`arr` [T, N, ...] with the rows of invalid steps replaced by `fill` (garbage never reaches a network)."""
    return np.where(valid.reshape(valid.shape + (1,) * (arr.ndim - 2)), arr, fill).astype(arr.dtype)


def check_actions(spaces: Spaces, actions: np.ndarray) -> None:
    """Discrete actions outside the space would index past the logits: refuse the batch instead."""
    action = spaces.action
    high = (np.asarray(action.nvec) if isinstance(action, MultiDiscreteActions)
            else action.n if isinstance(action, DiscreteActions) else None)
    if high is not None and actions.size and ((actions < 0).any() or (actions >= high).any()):
        raise ValueError("actions outside the action space in valid rows")


class PPO:
    def __init__(self, spaces: Spaces, cfg: PPOParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.cfg, self.device = cfg, device
        self.spaces = spaces
        encoder = default_encoder(spaces.obs)
        self._manifest = PolicyManifest(spaces=spaces, encoder=encoder, net=cfg.net, head=behaviour.head)
        self.actor = PolicyNet(self._manifest).to(device)
        if behaviour.head == "gaussian":
            with torch.no_grad():
                self.actor.log_std.fill_(cfg.log_std_init)
        self.critic = Network(spaces.obs, encoder, cfg.net, 1).to(device)
        self.params = [*self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = torch.optim.Adam(self.params, lr=cfg.learning_rate, eps=1e-5)
        self.generator = torch.Generator().manual_seed(seed)  # minibatch shuffling only
        self.updates = 0
        self.td_abs = None

    def _values(self, obs: np.ndarray) -> np.ndarray:
        """Critic outputs for [T, N, *obs] observations, as a [T, N] float64 array."""
        steps, envs = obs.shape[:2]
        with torch.no_grad():
            out = self.critic(to_device(obs.reshape(steps * envs, *obs.shape[2:]), self.device))
        return out.squeeze(1).cpu().numpy().astype(np.float64).reshape(steps, envs)

    def _chunk_rows(self, chunk: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """GAE for one chunk; returns flat arrays of its valid rows only."""
        valid = valid_rows(chunk)
        obs, next_obs = masked(chunk["obs"], valid), masked(chunk["next_obs"], valid)
        rewards = np.where(valid, chunk["rewards"], 0.0)
        actions = masked(chunk["actions"], valid)
        logp = masked(chunk["logp"], valid)
        check_actions(self.spaces, actions)
        terminated = np.asarray(chunk["terminated"], bool) & valid
        before_invalid = np.zeros_like(valid)
        before_invalid[:-1] = ~valid[1:]
        ends = np.asarray(chunk["terminated"], bool) | np.asarray(chunk["truncated"], bool) | ~valid | before_invalid
        values = self._values(obs)
        advantages, targets = gae(rewards, values, self._values(next_obs), terminated, ends,
                                  self.cfg.gamma, self.cfg.gae_lambda)
        keep = valid.reshape(-1)

        def rows(a: np.ndarray) -> np.ndarray:
            return a.reshape(-1, *a.shape[2:])[keep]

        return {"obs": rows(obs), "actions": rows(actions), "logp": rows(logp), "advantages": rows(advantages),
                "targets": rows(targets), "values": rows(values).astype(np.float32)}

    def _batch(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        parts = [self._chunk_rows(c) for c in chunks]
        if not parts or sum(len(p["actions"]) for p in parts) == 0:
            raise ValueError("PPO update on an empty batch: no valid rows")
        return {k: to_device(np.concatenate([p[k] for p in parts]), self.device) for k in parts[0]}

    def _minibatches(self, rows: int) -> list[torch.Tensor]:
        perm = torch.randperm(rows, generator=self.generator).to(self.device)
        pieces = list(perm.split(self.cfg.minibatch_size))
        if len(pieces) > 1 and len(pieces[-1]) < 2:
            pieces[-2:] = [torch.cat(pieces[-2:])]
        return pieces

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        batch = self._batch(chunks)
        targets, values = batch["targets"], batch["values"]
        target_var = targets.var(correction=0).item()
        explained = 0.0 if target_var == 0 else 1.0 - (targets - values).var(correction=0).item() / target_var
        sums = dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"), 0.0)
        count = 0
        for _ in range(cfg.epochs):
            for idx in self._minibatches(len(targets)):
                obs = batch["obs"][idx]
                logp_new, entropy_rows = log_prob_entropy(self._manifest.head, self.spaces, self.actor(obs),
                                                          getattr(self.actor, "log_std", None), batch["actions"][idx])
                entropy = entropy_rows.mean()
                log_ratio = (logp_new - batch["logp"][idx]).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
                ratio = log_ratio.exp()
                adv = batch["advantages"][idx]
                if cfg.normalize_advantages:
                    adv = (adv - adv.mean()) / (adv.std(correction=0) + 1e-8)
                surrogate = torch.min(ratio * adv, ratio.clamp(1 - cfg.clip_range, 1 + cfg.clip_range) * adv)
                policy_loss = -surrogate.mean()
                value_loss = 0.5 * (self.critic(obs).squeeze(1) - targets[idx]).pow(2).mean()
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

    def policy_state(self) -> dict[str, torch.Tensor]:
        return self.actor.state_dict()

    def manifest(self) -> PolicyManifest:
        return self._manifest

    def state(self) -> dict:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "optimizer": self.optimizer.state_dict(), "updates": self.updates,
                "generator": self.generator.get_state()}

    def load(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        if "generator" in state:  # the shuffling stream: without it a resumed run draws other minibatches
            self.generator.set_state(state["generator"])
