"""The learners' optimizers: torch.optim, built off the start-up's critical path, resuming any earlier checkpoint.

Why in the background: building a torch.optim optimizer imports torch._dynamo (torch 2.13: about a second of CPU and
72 MiB), and a learner builds its optimizers in its constructor, before its first policy, which on-policy collectors
wait for. `BackgroundOptimizer` builds the optimizer in a thread of its own, started by that constructor: the
learner goes on to resume, register its hooks and publish its first policy (the chunk loop publishes before any
update) while the import runs, mostly during the HTTP waits that follow. Its first step, state_dict or load waits
for the build if it is not done yet. Measured with `rlfleet up` on an on-policy CartPole run, launch to the first
policy, medians of 10 interleaved (five processes on two shared cores): 2.31 s with the learners' former optimizers
(learner_worker/optim.py), 2.35 s with this, 3.21 s with torch.optim built in the constructor. Holding the build
back until the first policy was out measured no better (2.21 vs 2.30 s in one invocation), so it is not.

Which kernels, measured on this project's CPUs (one thread, `optimizer.step()` alone, medians): `fused=True` for
Adam, AdamW and SGD is 2-4x faster than `foreach` or the per-tensor loop on the CartPole MLPs of the chunk and
replay loops and on a 7M-parameter CNN (Adam on the CNN: 6.7 ms fused, 29 ms foreach, 37 ms loop); RMSprop has no
fused kernel and `foreach=True` is the faster of its two on those MLPs (152 vs 230 us). Fused kernels run on every
device torch supports (CPU, CUDA, MPS, XPU).

Checkpoints: `load_state_dict` takes the state dict of torch.optim (this version's, or an earlier one's) or of the
learner's own optimizers of earlier versions (learner_worker/optim.py: the same per-parameter state, except that its
RMSprop kept no step count), and keeps the hyperparameters this optimizer was built with (the run's config) instead
of the saved ones, as those did. Loading torch.optim's group as saved would also have turned a fused optimizer back
into a slow one (their group has no "fused" key) and an AdamW into Adam.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import torch

# The kernel each optimizer class (and its subclasses) runs with, as measured above.
KERNELS: dict[type[torch.optim.Optimizer], dict[str, Any]] = {
    torch.optim.Adam: {"fused": True}, torch.optim.AdamW: {"fused": True}, torch.optim.SGD: {"fused": True},
    torch.optim.RMSprop: {"foreach": True}}


class BackgroundOptimizer:
    """A torch.optim optimizer of class `kind` over `params`, being built in a thread from construction on.

    `optimizer` is the torch.optim object itself (for an LR scheduler or a GradScaler); `zero_grad`, `step`,
    `state_dict` and `load_state_dict` are its own, the last taking every earlier layout (module docstring)."""

    def __init__(self, kind: type[torch.optim.Optimizer], params: Iterable[torch.Tensor], **hyper: Any) -> None:
        kernel = next((KERNELS[base] for base in kind.__mro__ if base in KERNELS), None)
        if kernel is None:
            raise TypeError(f"{kind.__name__} has no kernel choice here; measure one and add it to KERNELS in "
                            f"{__name__}")
        params = list(params)
        if not params:
            raise ValueError(f"{kind.__name__}: no parameters to optimize")
        self._built: Future[torch.optim.Optimizer] = Future()
        threading.Thread(target=self._build, args=(kind, params, {**hyper, **kernel}),
                         name=f"build-{kind.__name__}", daemon=True).start()

    def _build(self, kind: type[torch.optim.Optimizer], params: list[torch.Tensor], hyper: dict[str, Any]) -> None:
        try:
            self._built.set_result(kind(params, **hyper))
        except BaseException as exc:  # a bad hyperparameter: raised where the learner first uses the optimizer
            self._built.set_exception(exc)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The built optimizer; waits for the build."""
        return self._built.result()

    def zero_grad(self) -> None:
        self.optimizer.zero_grad()

    def step(self) -> None:
        self.optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """The per-parameter state of `saved`, with this optimizer's own hyperparameters."""
        optimizer = self.optimizer
        groups = optimizer.param_groups
        saved_groups = saved["param_groups"]
        if [len(g["params"]) for g in saved_groups] != [len(g["params"]) for g in groups]:
            raise ValueError(f"{type(optimizer).__name__} state for parameter groups of "
                             f"{[len(g['params']) for g in saved_groups]} parameters, this optimizer has "
                             f"{[len(g['params']) for g in groups]}: the checkpoint is another network's")
        group_of = {int(i): group for group, saved_group in zip(groups, saved_groups, strict=True)
                    for i in saved_group["params"]}
        state = {int(i): _slots(optimizer, group_of[int(i)], int(i), slots) for i, slots in saved["state"].items()}
        optimizer.load_state_dict({"state": state, "param_groups": [
            {**{k: v for k, v in group.items() if k != "params"}, "params": saved_group["params"]}
            for group, saved_group in zip(groups, saved_groups, strict=True)]})


def _slots(optimizer: torch.optim.Optimizer, group: dict[str, Any], index: int,
           saved: dict[str, Any]) -> dict[str, Any]:
    """The state tensors a step of `optimizer` reads for parameter `index`, from those saved for it."""
    if isinstance(optimizer, torch.optim.RMSprop):
        needed = ({"step", "square_avg"} | ({"momentum_buffer"} if group["momentum"] else set())
                  | ({"grad_avg"} if group["centered"] else set()))
    elif isinstance(optimizer, torch.optim.SGD):
        needed = {"momentum_buffer"} if group["momentum"] else set()
    else:  # Adam, AdamW
        needed = {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if group["amsgrad"] else set())
    slots = {name: value for name, value in saved.items() if name in needed and value is not None}
    if isinstance(optimizer, torch.optim.RMSprop) and "step" not in slots:
        slots["step"] = torch.zeros(())  # learner_worker/optim.py kept no count; RMSprop's update does not read it
    if set(slots) != needed:
        raise ValueError(f"{type(optimizer).__name__} state of parameter {index} has {sorted(saved)}, needs "
                         f"{sorted(needed)}: the checkpoint was written with other optimizer settings; resume "
                         f"with those or start the run afresh")
    return slots
