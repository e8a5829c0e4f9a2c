"""The learners' optimizers: Adam (AdamW's decoupled weight decay as an option), RMSprop and SGD with momentum.

Why not torch.optim: building any torch.optim optimizer, and stepping it, imports torch._dynamo (torch 2.13:
1.0 s of CPU and 72 MiB in every learner, measured). That second sits between a learner's start and its first
policy, which on-policy collectors wait for (on CartPole the first policy came 4.7 s after launch with it, 3.1 s
without).
These classes keep torch's update rules, defaults and state_dict layout ("state" per parameter index,
"param_groups" with the hyperparameters), so checkpoints written by earlier versions with torch.optim load
unchanged; tests/learner_worker/test_optim.py steps each side by side with its torch.optim counterpart.
Adam runs torch's fused kernel (`torch._fused_adam_`, what `torch.optim.Adam(fused=True)` calls: one pass over
memory, on every device torch supports), the others torch's multi-tensor `_foreach` ops.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import torch


class Optimizer:
    """One parameter group: the hyperparameters, the parameters in order, and each one's state tensors."""

    kind: ClassVar[str]

    def __init__(self, params: Iterable[torch.Tensor], **hyper: Any) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{self.kind}: no parameters to optimize")
        self.hyper = hyper
        self.state: dict[int, dict[str, torch.Tensor]] = {}

    def zero_grad(self) -> None:
        """Gradients to None, not zeros: the next backward writes them instead of adding to them."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient (as torch.optim, the others are left alone)."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        for i in live:
            if i not in self.state:
                self.state[i] = self._fresh(self.params[i])
        if live:
            params = [self.params[i] for i in live]
            self._update(params, [p.grad for p in params if p.grad is not None], [self.state[i] for i in live])

    def _fresh(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _update(self, params: list[torch.Tensor], grads: list[torch.Tensor],
                states: list[dict[str, torch.Tensor]]) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"state": {i: dict(s) for i, s in self.state.items()},
                "param_groups": [{**self.hyper, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """The state of a checkpoint (this class's, or torch.optim's of the same kind); the hyperparameters stay
        the ones this optimizer was built with (the run's config)."""
        groups = saved["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"{self.kind} state for {[len(g['params']) for g in groups]} parameters, "
                             f"this optimizer has {len(self.params)}")
        state: dict[int, dict[str, torch.Tensor]] = {}
        for i, slots in saved["state"].items():
            param = self.params[int(i)]
            fresh = self._fresh(param)
            state[int(i)] = {name: value.to(device=fresh[name].device, dtype=fresh[name].dtype)
                             for name, value in slots.items() if name in fresh and value is not None}
            if set(state[int(i)]) != set(fresh):
                raise ValueError(f"{self.kind} state of parameter {i} has {sorted(slots)}, needs {sorted(fresh)}")
        self.state = state


class Adam(Optimizer):
    """torch.optim.Adam (L2 penalty added to the gradient) or, with `decoupled`, torch.optim.AdamW (weights
    decayed by lr * weight_decay each step)."""

    kind = "adam"

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, decoupled=decoupled)

    def _fresh(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"step": torch.zeros((), dtype=torch.float32, device=param.device),
                "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format)}

    def _update(self, params: list[torch.Tensor], grads: list[torch.Tensor],
                states: list[dict[str, torch.Tensor]]) -> None:
        h = self.hyper
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        fused = torch._fused_adamw_ if h["decoupled"] else torch._fused_adam_
        fused(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [], steps,
              lr=h["lr"], beta1=h["betas"][0], beta2=h["betas"][1], weight_decay=h["weight_decay"], eps=h["eps"],
              amsgrad=False, maximize=False)


class RMSprop(Optimizer):
    """torch.optim.RMSprop without momentum or centring: divide by the root of a running mean
    of squared gradients."""

    kind = "rmsprop"

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps)

    def _fresh(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"square_avg": torch.zeros_like(param, memory_format=torch.preserve_format)}

    def _update(self, params: list[torch.Tensor], grads: list[torch.Tensor],
                states: list[dict[str, torch.Tensor]]) -> None:
        h = self.hyper
        square_avg = [s["square_avg"] for s in states]
        torch._foreach_mul_(square_avg, h["alpha"])
        torch._foreach_addcmul_(square_avg, grads, grads, value=1 - h["alpha"])
        denom = torch._foreach_sqrt(square_avg)
        torch._foreach_add_(denom, h["eps"])
        torch._foreach_addcdiv_(params, grads, denom, value=-h["lr"])


class SGD(Optimizer):
    """torch.optim.SGD with heavy-ball momentum (no dampening, no Nesterov) and an L2 penalty."""

    kind = "sgd"

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-3, momentum: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)

    def _fresh(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        # torch starts the buffer as a copy of the first gradient; zeros times momentum plus it is the same
        if not self.hyper["momentum"]:
            return {}
        return {"momentum_buffer": torch.zeros_like(param, memory_format=torch.preserve_format)}

    def _update(self, params: list[torch.Tensor], grads: list[torch.Tensor],
                states: list[dict[str, torch.Tensor]]) -> None:
        h = self.hyper
        if h["weight_decay"]:
            grads = list(torch._foreach_add(grads, params, alpha=h["weight_decay"]))
        if h["momentum"]:
            buffers = [s["momentum_buffer"] for s in states]
            torch._foreach_mul_(buffers, h["momentum"])
            torch._foreach_add_(buffers, grads)
            grads = buffers
        torch._foreach_add_(params, grads, alpha=-h["lr"])
