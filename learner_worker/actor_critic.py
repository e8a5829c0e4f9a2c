"""What the chunk-loop learners share: a published actor and a private critic, and clean chunks to train on.

The actor is the policy file collectors act with, so it is always a plain `PolicyNet(manifest)`: encoder, MLP,
policy head. The critic never leaves the learner; it has one output or a categorical head (`value.head`), read
and trained through a `ValueCodec` (learner_worker/value_transform.py). It takes one of two forms
(`algo.net.trunk`):

* separate: a `Network` of its own, a second copy of encoder and MLP (MLPs by default: small, and what every
  CartPole-class figure was measured with);
* shared: a value head (one linear layer) on the actor's last hidden layer, as Stable-Baselines3 and CleanRL
  train Atari. Encoder and MLP are computed once for both heads and trained by both losses, which halves an
  image learner's compute (image encoders by default). The published file is still the actor alone.

Either way `ActorCriticNet` holds both as one module, so one forward pass gives both outputs and a learner
group wraps one module in DistributedDataParallel.

Invalid steps (`valid=False`, the env raised) never reach a loss. `clean` zeroes their rows before any
network sees them, so garbage there (NaN, out-of-range actions) cannot leak through NaN * 0, and marks them
as cuts on both sides: an invalid step is an episode end, and so is the valid step just before it, whose
return is then bootstrapped from its own (real) next observation instead of reading the invalid step's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.distributions import log_prob_entropy
from rlfleet.learner_worker.gae import gae
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.learner_worker.surrogate import clipped_objective
from rlfleet.learner_worker.value_transform import ValueCodec
from rlfleet.shared.config.base import Encoder, NetConfig, Trunk
from rlfleet.shared.config.values import CriticValue
from rlfleet.shared.payloads.spaces import DiscreteActions, MultiDiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest
from rlfleet.shared.policy.nets import Network, PolicyNet

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group

CPU = torch.device("cpu")


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


@dataclass(frozen=True)
class Steps:
    """One chunk, [T, N, ...], with invalid rows zeroed. `terminated`: no bootstrap; `ends`: no successor in
    this column (terminated, truncated, invalid, or just before an invalid step)."""

    obs: np.ndarray
    next_obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    logp: np.ndarray
    terminated: np.ndarray
    ends: np.ndarray
    valid: np.ndarray

    @staticmethod
    def flat(arr: np.ndarray) -> np.ndarray:
        """[T, N, ...] -> [T * N, ...] in (t, env) order."""
        return arr.reshape(-1, *arr.shape[2:])

    def rows(self, arr: np.ndarray) -> np.ndarray:
        """The valid rows of a [T, N, ...] array, flattened in (t, env) order."""
        return self.flat(arr)[self.valid.reshape(-1)]


def clean(chunk: dict[str, np.ndarray], spaces: Spaces) -> Steps:
    """The chunk's columns with invalid rows zeroed, and where each env column's episodes are cut."""
    valid = valid_rows(chunk)
    actions = masked(chunk["actions"], valid)
    check_actions(spaces, actions)
    before_invalid = np.zeros_like(valid)
    before_invalid[:-1] = ~valid[1:]
    terminated = np.asarray(chunk["terminated"], bool)
    ends = terminated | np.asarray(chunk["truncated"], bool) | ~valid | before_invalid
    return Steps(obs=masked(chunk["obs"], valid), next_obs=masked(chunk["next_obs"], valid), actions=actions,
                 rewards=np.where(valid, chunk["rewards"], 0.0), logp=masked(chunk["logp"], valid),
                 terminated=terminated & valid, ends=ends, valid=valid)


def orthogonal_init(actor: PolicyNet, critic: nn.Module) -> None:
    """`algo.net.init: orthogonal` (shared/config/base.py NetConfig.init): every linear and convolutional layer
    orthogonal with gain sqrt(2) and zero bias, then the policy head at gain 0.01 and the value head (the critic's
    last linear layer) at 1. Recurrent cores are left as torch made them."""
    def reset(layer: nn.Module, gain: float) -> None:
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    with torch.no_grad():
        for module in (*actor.modules(), *critic.modules()):
            reset(module, math.sqrt(2))
        reset(actor.body[-1], 0.01)
        reset([m for m in critic.modules() if isinstance(m, nn.Linear)][-1], 1.0)


def trunk_of(net: NetConfig, encoder: Encoder) -> Trunk:
    """`algo.net.trunk`, or its default: shared for image encoders, separate for the MLP."""
    if net.trunk is not None:
        return net.trunk
    return "separate" if encoder.kind == "mlp" else "shared"


class ActorCriticNet(nn.Module):
    """The actor and the critic as one module. `forward(obs, value_obs)` -> (actor outputs for `obs`, critic
    outputs for `obs` followed by `value_obs`), with the encoder run once per row when the trunk is shared."""

    def __init__(self, actor: PolicyNet, critic: nn.Module, shared: bool) -> None:
        super().__init__()
        self.actor, self.critic, self.shared = actor, critic, shared

    def forward(self, obs: torch.Tensor, value_obs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        both = obs if value_obs is None else torch.cat([obs, value_obs])
        if self.shared:
            hidden = self.actor.hidden(both)
            return self.actor.head(hidden[:len(obs)]), self.critic(hidden)
        return self.actor(obs), self.critic(both)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """Critic outputs alone (the actor's head is not run)."""
        return self.critic(self.actor.hidden(obs)) if self.shared else self.critic(obs)


class ActorCritic:
    """The networks, their checkpointed state and the published policy; subclasses add `optimizer` and
    `update`."""

    optimizer: BackgroundOptimizer

    def __init__(self, spaces: Spaces, net: NetConfig, behaviour: Behaviour, seed: int,
                 log_std_init: float, value: CriticValue, device: torch.device = CPU) -> None:
        torch.manual_seed(seed)
        self.spaces, self.device = spaces, device
        self._manifest = PolicyManifest.of(spaces, net, behaviour.head)
        self.actor = PolicyNet(self._manifest).to(device)
        if hasattr(self.actor, "log_std"):
            with torch.no_grad():
                self.actor.log_std.fill_(log_std_init)
        self.codec = ValueCodec(value)
        self.trunk = trunk_of(net, self._manifest.encoder)
        self.critic: nn.Module = self._critic(net).to(device)
        if net.init == "orthogonal":
            orthogonal_init(self.actor, self.critic)
        self.model: nn.Module = self._model()
        self.params = [*self.actor.parameters(), *self.critic.parameters()]
        # What the trained forward passes call: the model itself, or its DistributedDataParallel wrapper once the
        # learner joined a learner group (`join`).
        self.train_model: nn.Module = self.model
        self.group: Group | None = None
        self.updates = 0
        self.td_abs = None
        # The shuffling stream of the learners that take minibatch steps (those with a minibatch_size setting);
        # kept in the checkpoint, so a resumed run draws the minibatches it would have drawn.
        self.generator = torch.Generator().manual_seed(seed)

    def _critic(self, net: NetConfig) -> nn.Module:
        """The critic: a value head on the actor's last hidden layer (shared trunk) or a network of its own."""
        if self.trunk == "shared":
            return nn.Linear(self.actor.hidden_width, self.codec.outputs)
        return Network(self.spaces.obs, self._manifest.encoder, net, self.codec.outputs)

    def _model(self) -> nn.Module:
        """The actor and critic as the one module trained forward passes call."""
        return ActorCriticNet(self.actor, self.critic, shared=self.trunk == "shared")

    def join(self, group: Group) -> None:
        """Train as one rank of `group`: gradients through both networks are averaged over the ranks."""
        self.group = group
        self.train_model = group.wrap(self.model)

    def values(self, obs: np.ndarray) -> np.ndarray:
        """Critic outputs for [T, N, *obs] observations, as a [T, N] float64 array (no gradient)."""
        steps, envs = obs.shape[:2]
        assert isinstance(self.model, ActorCriticNet), "a recurrent actor-critic reads sequences from a state"
        with torch.no_grad():
            out = self.model.values(to_device(obs.reshape(steps * envs, *obs.shape[2:]), self.device))
        return self.codec.values(out).float().cpu().numpy().astype(np.float64).reshape(steps, envs)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor, value_obs: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log pi(a|s), entropy) of the current actor per row of `obs`, and the critic's outputs for `obs`
        followed by `value_obs`, all with gradient, from one forward pass."""
        actor_out, critic_out = self.train_model(obs, value_obs)
        logp, entropy = log_prob_entropy(self._manifest.head, self.spaces, actor_out,
                                         getattr(self.actor, "log_std", None), actions, obs)
        return logp, entropy, critic_out

    def gae_rows(self, chunk: dict[str, np.ndarray], gamma: float, lam: float) -> dict[str, np.ndarray]:
        """GAE with the current critic for one chunk; flat arrays of its valid rows only."""
        steps = clean(chunk, self.spaces)
        values = self.values(steps.obs)
        advantages, targets = gae(steps.rewards, values, self.values(steps.next_obs), steps.terminated,
                                  steps.ends, gamma, lam)
        return {"obs": steps.rows(steps.obs), "actions": steps.rows(steps.actions), "logp": steps.rows(steps.logp),
                "advantages": steps.rows(advantages), "targets": steps.rows(targets),
                "values": steps.rows(values).astype(np.float32)}

    def gae_batch(self, chunks: list[dict[str, np.ndarray]], gamma: float, lam: float) -> dict[str, torch.Tensor]:
        """`gae_rows` of every chunk (they may differ in T and N), concatenated; ValueError without a valid row."""
        parts = [self.gae_rows(c, gamma, lam) for c in chunks]
        if sum(len(p["actions"]) for p in parts) == 0:
            raise ValueError("update on an empty batch: no valid rows")
        return {k: to_device(np.concatenate([p[k] for p in parts]), self.device) for k in parts[0]}

    def policy_gradient_step(self, logp: torch.Tensor, entropy: torch.Tensor, critic_out: torch.Tensor,
                             advantages: torch.Tensor, targets: torch.Tensor, value_coef: float, entropy_coef: float,
                             max_grad_norm: float, ratio: torch.Tensor | None = None,
                             clip_ratio: float | None = None) -> dict[str, float]:
        """One gradient step on the actor-critic loss of rows whose log pi(a|s), entropy and critic outputs carry
        gradient; the reported losses are those before the step.

        loss = policy term + value_coef * mean(value loss) - entropy_coef * mean(H), the value loss being
        0.5 * (V(s) - target)^2 for a plain scalar critic (ValueCodec.loss in general). The policy term is

        * without `ratio`: -mean(A * log pi(a|s)), the plain policy gradient;
        * with `ratio` (pi(a|s) / mu(a|s) with gradient, mu the policy that acted): the clipped surrogate of
          proximal policy optimisation (learner_worker/surrogate.py: clipped_objective), -mean(ratio * A) without
          `clip_ratio`; the fraction of rows outside the clip range is reported as `clip_fraction`.
        """
        if clip_ratio is not None and ratio is None:
            raise ValueError("clip_ratio clips a ratio: pass the ratio pi/mu as well")
        average = self.batch_mean(len(logp))
        info: dict[str, float] = {}
        if ratio is None:
            policy_loss = -average(advantages * logp)
        elif clip_ratio is None:
            policy_loss = -average(ratio * advantages)
        else:
            surrogate, clipped = clipped_objective(ratio, advantages, clip_ratio)
            policy_loss = -average(surrogate)
            info["clip_fraction"] = average(clipped.float()).item()
        value_loss = average(self.codec.loss(critic_out, targets))
        values = self.codec.values(critic_out.detach())
        mean_entropy = average(entropy)
        loss = policy_loss + value_coef * value_loss - entropy_coef * mean_entropy
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_grad_norm)
        self.optimizer.step()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": mean_entropy.item(),
                "grad_norm": grad_norm.item(), "explained_variance": explained_variance(targets, values), **info}

    def batch_mean(self, rows: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """The mean over the whole batch of a per-row loss term of this learner's `rows` rows. In a learner group
        the batch is every rank's rows together, in shares that differ (each rank takes the chunks the queue holds):
        this rank's sum over the group's row count times the world size, so DistributedDataParallel's average of
        the ranks' gradients is the gradient of the whole batch's mean (and what a rank reports is its part)."""
        if self.group is None:
            return torch.mean
        scale = self.group.world_size / self.group.sum(torch.tensor([float(rows)])).item()

        def average(x: torch.Tensor) -> torch.Tensor:
            return x.sum() * scale
        return average

    def policy_state(self) -> dict[str, torch.Tensor]:
        return self.actor.state_dict()

    def manifest(self) -> PolicyManifest:
        return self._manifest

    def state(self) -> dict:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(), "trunk": self.trunk,
                "optimizer": self.optimizer.state_dict(), "updates": self.updates,
                "generator": self.generator.get_state()}

    def load(self, state: dict) -> None:
        trunk = state.get("trunk", "separate")  # checkpoints from before the trunk was a choice had separate ones
        if trunk != self.trunk:
            raise ValueError(f"the checkpoint's critic has a {trunk} trunk, this learner's a {self.trunk} one: set "
                             f"algo.net.trunk: {trunk} to resume from it")
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        if "generator" in state:  # checkpoints from before every actor-critic kept one have none
            self.generator.set_state(state["generator"])


def explained_variance(targets: torch.Tensor, values: torch.Tensor) -> float:
    """1 - Var(targets - values) / Var(targets): how much of the return the critic predicted (0 if constant)."""
    target_var = targets.var(correction=0).item()
    return 0.0 if target_var == 0 else 1.0 - (targets - values).var(correction=0).item() / target_var
