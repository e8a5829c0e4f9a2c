"""Policies for tests: spaces, manifests and randomly initialised actors built the way a learner builds them."""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.actors import Actor, build_actor
from rlfleet.shared.policy.manifest import Behaviour, Head, PolicyManifest, default_encoder
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.wire import LearnerTask

CARTPOLE = Spaces(obs=ObsSpace(shape=(4,), dtype="float32"), action=DiscreteActions(n=2))
PENDULUM = Spaces(obs=ObsSpace(shape=(3,), dtype="float32"), action=BoxActions(low=(-2.0,), high=(2.0,)))
EPSILON_GREEDY = Behaviour(head="q_values", sample=False)
SAMPLING = Behaviour(head="categorical", sample=True)


def flat_spaces(obs_dim: int, n_actions: int) -> Spaces:
    return Spaces(obs=ObsSpace(shape=(obs_dim,), dtype="float32"), action=DiscreteActions(n=n_actions))


def manifest(spaces: Spaces = CARTPOLE, head: Head = "q_values", hidden: tuple[int, ...] = (16,)) -> PolicyManifest:
    return PolicyManifest(spaces=spaces, encoder=default_encoder(spaces.obs), net=NetConfig(hidden=hidden), head=head)


def policy_state(m: PolicyManifest, seed: int = 0) -> dict[str, np.ndarray]:
    """The state dict of a freshly initialised PolicyNet, as numpy arrays (what a policy file holds)."""
    torch.manual_seed(seed)
    return {k: v.numpy().copy() for k, v in PolicyNet(m).state_dict().items()}


def random_actor(spaces: Spaces = CARTPOLE, head: Head = "q_values", hidden: tuple[int, ...] = (16,),
                 seed: int = 0) -> Actor:
    m = manifest(spaces, head, hidden)
    return build_actor(m, policy_state(m, seed))


def learner_task(config: RunConfig, seed: int = 0) -> LearnerTask:
    """The learner task a coordinator would hand out for `config`."""
    plan = RunPlan.of(config)
    return LearnerTask(task_id="learn-0", buffer_id="replay-0", algo=config.algo, env=config.env, spaces=plan.spaces,
                       behaviour=plan.behaviour, replay=config.replay, sampling=config.sampling,
                       collector=config.collector, seed=seed)


def cartpole_expert() -> tuple[PolicyManifest, dict[str, torch.Tensor]]:
    """A hand-made CartPole policy that balances for all 500 steps: push the cart the way the pole falls,
    sign(angle + 0.5 * angular velocity), as a 4-1-2 tanh MLP with a categorical head."""
    m = PolicyManifest(spaces=CARTPOLE, encoder=default_encoder(CARTPOLE.obs),
                       net=NetConfig(hidden=(1,), activation="tanh"), head="categorical")
    state = {"body.0.weight": torch.tensor([[0.0, 0.0, 10.0, 5.0]]), "body.0.bias": torch.zeros(1),
             "body.2.weight": torch.tensor([[-1.0], [1.0]]), "body.2.bias": torch.zeros(2)}
    return m, state
