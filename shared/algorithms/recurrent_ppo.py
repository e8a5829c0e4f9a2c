"""recurrent_ppo's registry entry (sb3-contrib's RecurrentPPO): clipped surrogate over whole env sequences of
chunks, unrolled from the core state each chunk stores (`algo.net.core`)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rlfleet.shared.algorithms.base import (
    AlgorithmSpec,
    ClippedSurrogateParams,
    sampled_head,
    sampling_behaviour,
    sde_fits,
)
from rlfleet.shared.config.base import CoreConfig, NetConfig


class RecurrentPPOParams(ClippedSurrogateParams):
    """Defaults are rl-zoo's RecurrentPPO hyperparameters for CartPoleNoVel-v1 (hyperparams/ppo_lstm.yml: 8 envs x
    32 steps, 20 epochs, batch 256, gamma 0.98, GAE 0.8, lr 1e-3, clip 0.2) with sb3-contrib's MlpLstmPolicy
    shape: 64x64 tanh MLPs behind one LSTM layer of 256 units (rl-zoo's learning-rate and clip schedules are
    constants here)."""

    name: Literal["recurrent_ppo"] = "recurrent_ppo"
    """Algorithm name."""
    actor_critic: ClassVar[bool] = True
    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh", core=CoreConfig(kind="lstm", hidden=256))
    """The policy network: encoder, recurrent core (required), hidden layers and activation."""
    bptt_steps: Annotated[int | None, Field(ge=1, le=2**16)] = None
    """Truncated backprop through time over windows of this many steps: each env column of a longer chunk is cut
    into windows, each unrolled from the state the current weights reach at its start. Null: whole chunk columns.
    Long chunks (Pendulum's 1,024 steps) need it for more than a few minibatches per epoch. A minibatch is
    minibatch_size // L sequences of L steps (at least one), L being the chunks' length or `bptt_steps`."""


SPEC = AlgorithmSpec(name="recurrent_ppo", summary="sb3-contrib's RecurrentPPO: clipped surrogate, truncated BPTT over "
                     "each env's sequence in a chunk from its stored core state, GAE per env",
                     params=RecurrentPPOParams, loop="chunks",
                     learner="rlfleet.learner_worker.algorithms.recurrent_ppo:RecurrentPPO", head=sampled_head,
                     behaviour=sampling_behaviour, fits=sde_fits, recurrent=True, shares=("minibatch_size",))
