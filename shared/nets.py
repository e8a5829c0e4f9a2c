"""Networks shared by collectors, learner and evaluator, so a published state dict loads everywhere.

Every published policy is one `policy_network`: an MLP from observations to one output per action (Q-values
for DQN, logits for PPO's actor). Acting greedily is argmax either way, so the evaluator needs no algorithm.
"""

from __future__ import annotations

import torch
from torch import nn

from shared.config import NetConfig

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(in_dim: int, out_dim: int, net: NetConfig) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_dim
    for size in net.hidden:
        layers += [nn.Linear(width, size), ACTIVATIONS[net.activation]()]
        width = size
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


def policy_network(obs_dim: int, n_actions: int, net: NetConfig) -> nn.Sequential:
    return mlp(obs_dim, n_actions, net)


def greedy_actions(net: nn.Module, obs) -> torch.Tensor:
    with torch.inference_mode():
        return net(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1)


def sampled_actions(net: nn.Module, obs, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw actions from softmax(logits); returns (actions, their log-probabilities under the behaviour policy)."""
    with torch.inference_mode():
        logits = net(torch.as_tensor(obs, dtype=torch.float32))
        logp_all = torch.log_softmax(logits, dim=1)
        actions = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(1)
        return actions, logp_all.gather(1, actions[:, None]).squeeze(1)
