"""Networks shared by collectors, learner and evaluator, so a published state dict loads everywhere."""

from __future__ import annotations

import torch
from torch import nn


def q_network(obs_dim: int, n_actions: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = obs_dim
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    layers.append(nn.Linear(width, n_actions))
    return nn.Sequential(*layers)


def greedy_actions(net: nn.Module, obs) -> torch.Tensor:
    with torch.inference_mode():
        return net(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1)
