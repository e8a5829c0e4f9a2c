"""A learner group: `learner.replicas` learner processes training one model data-parallel on torch.distributed.

torchrun's elastic agent (torch.distributed.run) owns the group: it runs the c10d rendezvous, gives every process
its RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and re-forms the group when a process dies. This module joins
the process group those variables describe (gloo on CPU, NCCL when the learner trains on CUDA) and offers the
three things a learner needs from it (rank 0 serves the group's store on MASTER_ADDR alone:
learner_worker/rendezvous.py):

* `wrap`: the learner's trainable modules in DistributedDataParallel, which broadcasts rank 0's parameters when
  it wraps them and averages gradients across ranks during `backward`. Each rank's loss is a mean over its own,
  equal share of the batch (the config refuses replicas that do not divide it: shared/algorithms/base.py), so
  the average of the ranks' gradients is the gradient of the mean over the whole batch.
* `sum`: an all-reduce of the few statistics a loss normalises by (advantage moments, row counts), so every
  rank normalises with the whole batch's statistics, as a single learner would.
* `agree`: an all-gather of an 8-byte digest, refused on every rank when one rank's differs. At start the digest
  is the learner task's config: a rank started with another config never trains. After every update it is the
  parameters': ranks that drifted apart fail loudly instead of publishing one rank's model as everyone's.

A prioritized replay's importance weights need no all-reduce: the coordinator normalises them by the buffer's
minimum priority, the same for every rank's draw (coordinator/replay/samplers/proportional.py).
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Literal

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from rlfleet.learner_worker.rendezvous import group_address, pin_transport, process_group_store
from rlfleet.shared.wire import LearnerTask

log = logging.getLogger("rlfleet.learner")
GROUP_TIMEOUT = timedelta(seconds=120)  # a collective waiting longer than this for a rank fails instead of hanging


class GroupMismatch(RuntimeError):
    """The ranks of a learner group disagree (config or parameters): the group must not train on."""


def digest(chunks: Iterable[bytes]) -> int:
    """A signed 64-bit BLAKE2b digest of `chunks`, the form `Group.agree` gathers as one int64 tensor."""
    h = hashlib.blake2b(digest_size=8)
    for chunk in chunks:
        h.update(chunk)
    return int.from_bytes(h.digest(), "little", signed=True)


def weights_digest(modules: Iterable[nn.Module]) -> int:
    """The digest of every parameter and buffer of `modules`, bit for bit, in state-dict order."""
    return digest(t.detach().cpu().contiguous().numpy().tobytes()
                  for module in modules for t in module.state_dict().values())


class Group:
    """This process's membership of a learner group; `join` makes one from torchrun's environment."""

    def __init__(self, device: torch.device) -> None:
        self.rank, self.world_size, self.device = dist.get_rank(), dist.get_world_size(), device
        self.modules: list[nn.Module] = []  # the modules `wrap` wrapped, whose weights `check_weights` compares
        self.wrappers: list[DistributedDataParallel] = []

    @staticmethod
    def join(device: torch.device, config_digest: int, timeout: timedelta = GROUP_TIMEOUT) -> Group:
        """Join the process group torchrun describes in the environment (RANK, WORLD_SIZE, MASTER_ADDR,
        MASTER_PORT) and refuse to go on unless every rank holds the same config."""
        missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
        if missing:
            raise RuntimeError(f"a learner group's rank is started by torchrun, which sets {', '.join(missing)}; "
                               f"run `rlfleet learner`, which starts it when learner.replicas > 1")
        if device.type == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            device = torch.device("cuda", torch.cuda.current_device())
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        master, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        pin_transport(group_address(f"{master}:{port}"))
        store = process_group_store(master, port, rank, world_size, timeout)  # env:// listens on every interface
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=store, rank=rank,
                                world_size=world_size, timeout=timeout)
        group = Group(device)
        try:
            group.agree("config", config_digest)
        except GroupMismatch:
            group.leave()
            raise
        log.info("joined the learner group as rank %d of %d (%s)", group.rank, group.world_size,
                 dist.get_backend())
        return group

    def leave(self) -> None:
        """Leave the group for good. Each DDP wrapper's reducer holds the process group: left alive, the group
        is torn down at interpreter exit instead, and gloo's threads then abort the process ("terminate called
        without an active exception"), a learner that stopped cleanly exiting on SIGABRT."""
        if dist.is_initialized():
            try:
                dist.barrier()  # no rank closes its pairs while a peer still sends on them
            except RuntimeError as exc:  # a peer is gone already (torch.distributed.DistError): none to wait for
                log.info("leaving a learner group whose peers are gone (%s)", str(exc).splitlines()[0][:200])
            for wrapper in self.wrappers:
                wrapper.__dict__.pop("reducer", None)
            self.wrappers.clear()
            gc.collect()
            dist.destroy_process_group()

    def wrap(self, module: nn.Module) -> nn.Module:
        """`module` in DistributedDataParallel: call the wrapper in the forward pass whose loss is trained, so
        `backward` averages its gradients over the ranks; the module itself keeps its state-dict keys for
        policies and checkpoints."""
        self.modules.append(module)
        ids = [self.device.index] if self.device.type == "cuda" else None
        wrapper = DistributedDataParallel(module, device_ids=ids)
        self.wrappers.append(wrapper)
        return wrapper

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """The element-wise sum of `values` over the ranks (a new tensor; float64 keeps the moments exact)."""
        total = values.detach().to(self.device, torch.float64).clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    def moments(self, rows: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """(count, mean, sum of squared deviations) of every rank's observations [M, *shape] together."""
        x = torch.from_numpy(np.asarray(rows, np.float64)).reshape(len(rows), -1)
        sums = self.sum(torch.cat([x.new_tensor([len(x)]), x.sum(0), x.square().sum(0)])).cpu().numpy()
        n, total, squares = int(sums[0]), sums[1:1 + x.shape[1]], sums[1 + x.shape[1]:]
        shape = rows.shape[1:]
        if n == 0:
            return 0, np.zeros(shape), np.zeros(shape)
        mean = total / n
        return n, mean.reshape(shape), np.maximum(squares - n * mean ** 2, 0).reshape(shape)

    def agree(self, what: str, value: int) -> None:
        """Raise GroupMismatch on every rank unless every rank passed the same `value` (a `digest`)."""
        mine = torch.tensor([value], dtype=torch.int64, device=self.device)
        gathered = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(gathered, mine)
        values = [int(t.item()) for t in gathered]
        if len(set(values)) > 1:
            odd = [rank for rank, v in enumerate(values) if v != values[0]]
            raise GroupMismatch(f"learner group ranks disagree on the {what}: ranks {odd} differ from rank 0 "
                                f"(digests {[f'{v & (2**64 - 1):016x}' for v in values]})")

    def check_weights(self, iteration: int) -> None:
        """After every update: every rank's wrapped modules must hold bit-identical weights."""
        self.agree(f"weights after update {iteration}", weights_digest(self.modules))


def join_group(task: LearnerTask, device: torch.device) -> Group | None:
    """The learner group this learner is a rank of, or None when `learner.replicas` is 1. The config digest covers
    the whole task but its id: every rank must train the same algorithm on the same data with the same seed."""
    if task.learner.replicas == 1:
        return None
    same = task.model_copy(update={"task_id": "rank"}).model_dump_json()
    group = Group.join(device, digest([same.encode()]))
    if group.world_size != task.learner.replicas:
        group.leave()
        raise GroupMismatch(f"torchrun formed a group of {group.world_size} ranks but learner.replicas is "
                            f"{task.learner.replicas}: start the learner group with `rlfleet learner`")
    return group


Step = Literal["train", "wait", "stop"]


def next_step(group: Group | None, running: bool, ready: bool) -> Step:
    """What the loop does next: stop once this learner (in a group: any rank) stops, train once it (every rank)
    holds a batch, else wait for one, a rank that holds its batch keeping it. In a group every rank takes the same
    steps in the same order, so every update's collectives meet, and a stopping rank ends them all instead of
    leaving the others waiting in a collective."""
    if group is not None:
        stopped, waiting = group.sum(torch.tensor([not running, not ready])).tolist()
        running, ready = stopped == 0, waiting == 0
    return "stop" if not running else "train" if ready else "wait"
