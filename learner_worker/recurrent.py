"""What learners of a recurrent core share: sequences of env columns from chunks, and an actor-critic over them.

A chunk of a run with a core (`algo.net.core`) stores each env's core state at its first row (`core_state`); every
later row's state follows from the rows before it, zeroed where an episode begins: a row begins one exactly when
the row before it in its column is terminated, truncated or not valid (`episode_starts`), which is where the
collector's actor reset it. So each env column of a chunk is one sequence a learner can unroll from the stored
state with its current weights, with truncated backprop through time over the chunk's length (the "stored
state" strategy of Kapturowski et al., 2019; the state is the behaviour policy's, one or more versions old under
policy lag).

The critic takes one of three forms (`algo.net.trunk`):

* separate (the default for MLP encoders): an MLP of its own on the actor core's output, detached, as
  sb3-contrib's `shared_lstm=True` ("only the actor gradient is used"): the policy loss alone trains the core.
  Letting the value loss train it too stalled CartPole without velocities (measured: explained variance 0 and
  returns ~20 after 60k env steps, against returns ~200 with the detached core), since its larger gradients,
  clipped together with the policy's, drowned what the policy needed the core to remember.
* shared: a value head on the actor's last hidden layer, both losses training everything, as CleanRL's LSTM
  agent does.
* separate_core: a network of its own with a core of its own (encoder, core, MLP), trained by the value loss
  alone: sb3-contrib RecurrentPPO's default (`enable_critic_lstm`). A critic that must estimate what the
  observation leaves out (Pendulum's angular velocity) then learns its own memory instead of reading what the
  policy gradient taught the actor's. Collectors never run the critic, so no chunk stores its state: the critic
  core starts every chunk column from zero, as at an episode start, and is warm again after a few rows (the
  first rows of an episode that began in an earlier chunk are valued from a shorter memory than they had).

`Sequences` packs the env columns of several chunks side by side, [T, S, ...], padded at the end to the longest
chunk; padding rows are masked out and, coming after a column's real rows, never change the states of those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rlfleet.learner_worker.actor_critic import CPU, ActorCritic, Steps, clean
from rlfleet.learner_worker.device import to_device
from rlfleet.learner_worker.distributions import log_prob_entropy
from rlfleet.learner_worker.gae import gae
from rlfleet.shared.config.base import CoreConfig, NetConfig, Trunk
from rlfleet.shared.config.values import CriticValue
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.policy.nets import Core, Network, PolicyNet, mlp


def episode_starts(chunk: dict[str, np.ndarray]) -> np.ndarray:
    """[T, N] bool: rows whose state the collector's actor zeroed before acting, after a row that ended its episode
    (terminated or truncated: an env error's restart included) or was not valid (an error, or a core state that
    turned non-finite). The first row's stored state already is what that row was acted from."""
    ended = (np.asarray(chunk["terminated"], bool) | np.asarray(chunk["truncated"], bool)
             | ~np.asarray(chunk["valid"], bool))
    starts = np.zeros_like(ended)
    starts[1:] = ended[:-1]
    return starts


class RecurrentActorCriticNet(nn.Module):
    """The actor (with its core) and the critic as one module: `forward(obs [T, B, *obs], state [B, *S], starts
    [T, B], critic_state [B, *S] or None)` -> (actor outputs [T, B, out], critic outputs [T, B, k], the actor's
    state after the last row). `critic_state` is the critic core's state at the first row (trunk separate_core;
    None: zeros, as at an episode start)."""

    def __init__(self, actor: PolicyNet, critic: nn.Module, trunk: Trunk) -> None:
        super().__init__()
        assert actor.core is not None, "a recurrent actor-critic needs an actor with a core"
        self.actor, self.critic, self.trunk = actor, critic, trunk
        self.core = actor.core

    @property
    def critic_core(self) -> Core | None:
        """The critic's own core (trunk separate_core), else None."""
        return self.critic.core if isinstance(self.critic, Network) else None

    def _heads(self, core_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor and critic outputs on the actor core's rows (trunks shared and separate)."""
        hidden = self.actor.body[:-1](core_out)
        return self.actor.head(hidden), self.critic(hidden if self.trunk == "shared" else core_out.detach())

    def forward(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor,
                critic_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        core_out, final = self.core(self.actor.core_input(obs), state, starts)
        if not isinstance(self.critic, Network):
            return (*self._heads(core_out), final)
        assert self.critic.core is not None
        if critic_state is None:
            critic_state = self.critic.core.initial(obs.shape[1], obs.device)
        critic_hidden, _ = self.critic.sequence_hidden(obs, critic_state, starts)
        return self.actor.head(self.actor.body[:-1](core_out)), self.critic.head(critic_hidden), final

    def values_and_next(self, obs: torch.Tensor, next_obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Critic outputs for every row's `obs` and `next_obs`, [T, B, k] each, and the actor's and the critic
        core's states after every row, [T, B, *S] (the critic's: None unless it has a core of its own), without
        gradient. `next_obs` of row t is read from the state after row t, the state its env carried into it, so a
        truncated episode and a chunk's last row bootstrap from the memory they had."""
        steps, batch = obs.shape[:2]
        with torch.no_grad():
            core_out, after = self.core.states(self.actor.core_input(obs), state, starts)
            if not isinstance(self.critic, Network):
                values = self._heads(core_out)[1]
                next_out, _ = self.core(self.actor.core_input(next_obs).reshape(1, steps * batch, -1),
                                        after.reshape(steps * batch, *after.shape[2:]))
                next_values = self._heads(next_out)[1].reshape(steps, batch, -1)
                return values, next_values, after, None
            critic, core = self.critic, self.critic_core
            assert core is not None
            critic_rows, critic_after = core.states(critic.core_input(obs), core.initial(batch, obs.device), starts)
            values = critic.head(critic.body[:-1](critic_rows))
            next_rows, _ = core(critic.core_input(next_obs).reshape(1, steps * batch, -1),
                                critic_after.reshape(steps * batch, *critic_after.shape[2:]))
            next_values = critic.head(critic.body[:-1](next_rows)).reshape(steps, batch, -1)
        return values, next_values, after, critic_after


@dataclass(frozen=True)
class Sequences:
    """Env columns of chunks as sequences, [T, S, ...] (state: the actor core's, [S, *state_shape]); `mask` [T, S]:
    rows trained on (valid, and not padding)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logp: torch.Tensor
    starts: torch.Tensor
    mask: torch.Tensor
    state: torch.Tensor
    advantages: torch.Tensor
    targets: torch.Tensor
    values: torch.Tensor
    critic_state: torch.Tensor | None = None
    """The critic core's state at each sequence's first row (trunk separate_core), [S, *state_shape]."""

    @property
    def count(self) -> int:
        return int(self.state.shape[0])

    @property
    def length(self) -> int:
        return int(self.obs.shape[0])


def padded(arr: np.ndarray, steps: int) -> np.ndarray:
    """[T, N, ...] -> [steps, N, ...], zeros after row T."""
    if len(arr) == steps:
        return arr
    pad = np.zeros((steps - len(arr), *arr.shape[1:]), arr.dtype)
    return np.concatenate([arr, pad])


class RecurrentActorCritic(ActorCritic):
    """ActorCritic whose actor has a core (`net.core`) and whose critic reads it (module doc); per-chunk GAE from
    the stored states, sequences for minibatches of whole env columns."""

    def __init__(self, spaces: Spaces, net: NetConfig, behaviour: Behaviour, seed: int,
                 log_std_init: float, value: CriticValue, device: torch.device = CPU) -> None:
        if net.core is None:
            raise ValueError("a recurrent learner needs a core: set algo.net.core, e.g. {kind: lstm, hidden: 64}")
        self.core_config: CoreConfig = net.core
        super().__init__(spaces, net, behaviour, seed, log_std_init, value, device)

    def _critic(self, net: NetConfig) -> nn.Module:
        if self.trunk == "shared":
            return nn.Linear(self.actor.hidden_width, self.codec.outputs)
        if self.trunk == "separate_core":
            return Network(self.spaces.obs, self._manifest.encoder, net, self.codec.outputs, core=self.core_config)
        return mlp(self.core_config.hidden, self.codec.outputs, net)

    def _model(self) -> nn.Module:
        return RecurrentActorCriticNet(self.actor, self.critic, self.trunk)

    @property
    def recurrent_model(self) -> RecurrentActorCriticNet:
        assert isinstance(self.model, RecurrentActorCriticNet)
        return self.model

    def chunk_gae(self, chunk: dict[str, np.ndarray], gamma: float, lam: float
                  ) -> tuple[Steps, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(the cleaned chunk, its episode starts, advantages, value targets, values), [T, N] each, and the actor
        core's and the critic core's (None without one) states after every row, [T, N, *S], from the chunk's stored
        core state with the current weights."""
        steps = clean(chunk, self.spaces)
        starts = episode_starts(chunk)
        dev = self.device
        out, next_out, after, critic_after = self.recurrent_model.values_and_next(
            to_device(steps.obs, dev), to_device(steps.next_obs, dev), to_device(chunk["core_state"], dev),
            to_device(starts, dev))
        shape = steps.rewards.shape

        def raw(o: torch.Tensor) -> np.ndarray:
            return self.codec.values(o.reshape(-1, o.shape[-1])).float().cpu().numpy().astype(np.float64).reshape(
                shape)

        values = raw(out)
        advantages, targets = gae(steps.rewards, values, raw(next_out), steps.terminated, steps.ends, gamma, lam)
        return (steps, starts, advantages, targets, values.astype(np.float32), after.cpu().numpy(),
                None if critic_after is None else critic_after.cpu().numpy())

    def sequences(self, chunks: list[dict[str, np.ndarray]], gamma: float, lam: float,
                  window: int | None = None) -> Sequences:
        """Every env column of `chunks` with its GAE, side by side; ValueError without a valid row.

        `window`: columns longer than this are cut into windows of that many rows (the last one shorter, padded),
        each unrolled from the state the current weights reached before its first row (its column's stored state
        for the first window): truncated BPTT over windows, so a long chunk still makes many minibatches."""
        columns: list[dict[str, np.ndarray]] = []
        states: list[np.ndarray] = []
        critic_states: list[np.ndarray] = []
        for chunk in chunks:
            steps, starts, advantages, targets, values, after, critic_after = self.chunk_gae(chunk, gamma, lam)
            parts = {"obs": steps.obs, "actions": steps.actions, "logp": steps.logp, "starts": starts,
                     "mask": steps.valid, "advantages": advantages, "targets": targets, "values": values}
            size = len(starts) if window is None else window
            for begin in range(0, len(starts), size):
                columns.append({name: arr[begin:begin + size] for name, arr in parts.items()})
                states.append(chunk["core_state"] if begin == 0 else after[begin - 1])
                if critic_after is not None:  # the critic core starts each column from zero (module doc)
                    critic_states.append(np.zeros_like(critic_after[0]) if begin == 0 else critic_after[begin - 1])
        if sum(int(c["mask"].sum()) for c in columns) == 0:
            raise ValueError("update on an empty batch: no valid rows")
        length = max(len(c["starts"]) for c in columns)

        def joined(name: str) -> torch.Tensor:
            return to_device(np.concatenate([padded(c[name], length) for c in columns], axis=1), self.device)

        return Sequences(obs=joined("obs"), actions=joined("actions"), logp=joined("logp"), starts=joined("starts"),
                         mask=joined("mask"), state=to_device(np.concatenate(states), self.device),
                         advantages=joined("advantages"), targets=joined("targets"), values=joined("values"),
                         critic_state=to_device(np.concatenate(critic_states), self.device) if critic_states else None)

    def evaluate_sequences(self, seqs: Sequences, idx: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """For the sequences `idx`, unrolled from their stored states with gradient (truncated backprop through
        time over the chunk): (log pi(a|s), entropy, critic outputs, the rows' mask), the first three over the
        masked rows only, flattened in (t, sequence) order."""
        obs = seqs.obs[:, idx]
        critic_state = None if seqs.critic_state is None else seqs.critic_state[idx]
        actor_out, critic_out, _ = self.train_model(obs, seqs.state[idx], seqs.starts[:, idx], critic_state)
        mask = seqs.mask[:, idx].reshape(-1)

        def rows(x: torch.Tensor) -> torch.Tensor:
            return x.reshape(-1, *x.shape[2:])[mask]

        logp, entropy = log_prob_entropy(self._manifest.head, self.spaces, rows(actor_out),
                                         getattr(self.actor, "log_std", None), rows(seqs.actions[:, idx]), rows(obs))
        return logp, entropy, rows(critic_out), mask
