"""Loading a checkpoint from another run's store: the operator's (or a population trainer's) way to make this
run's learner continue from another run's weights, optimizer state and observation statistics.

The source is another run's directory, confined to the coordinator's checkpoint sources (RLFLEET_CHECKPOINT_SOURCES;
by default its own data directory), and one of its checkpoints (by default its latest). The coordinator never
loads the checkpoint itself (it does not import torch): it compares the checkpoint's signature
(shared/checkpoint_signature.py) with the signature of this run's own latest checkpoint, so the comparison covers
whatever the learner holds, optimizer included. A difference is a 409 naming it, counted in status and metrics;
nothing is staged and the learner never sees it. A compatible checkpoint is copied into this run's checkpoints store
(`loads/<request id>.pt`, so the learner reads only its own run's store, local or object store), the load is
journalled, and learners' directives name it from then on (learner_worker/trainer.py takes it up once).

Learners take up the latest load only, so a load's staged file is deleted once a newer load is durable.
A retry with the same request id answers the status and changes nothing, so a load is never applied twice by a
retried request; a new id loads again (a population trainer copies the same member's checkpoint more than once).
A learner group (`learner.replicas` > 1) is refused: its ranks would have to take the load up together.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from rlfleet.coordinator.errors import Conflict, IncompatibleCheckpoint, Invalid, NotFound
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.state.control import staged_path
from rlfleet.shared.checkpoint_signature import (
    CHECKPOINT_NAME,
    CheckpointSignature,
    incompatibility,
    signature_name,
)
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import CheckpointLoad, ControlStatus, LoadCheckpointRequest


@dataclass(frozen=True)
class _Staged:
    source: Path
    checkpoint: str
    signature: CheckpointSignature


class CheckpointLoads:
    def __init__(self, ctx: RunContext, checkpoints: PayloadStore | None, sources: tuple[Path, ...]) -> None:
        """`checkpoints` is this run's checkpoints store; `sources` the directories source runs must lie under."""
        self.ctx, self.checkpoints = ctx, checkpoints
        self.sources = tuple(root.resolve() for root in sources)

    async def load(self, request: LoadCheckpointRequest) -> ControlStatus:
        ctx = self.ctx
        if ctx.control.load_of(request.request_id) is None:
            ctx.running("load a checkpoint")
            if ctx.config.learner.replicas > 1:
                raise Conflict(f"this run trains with a learner group of {ctx.config.learner.replicas}; loading a "
                               "checkpoint into a group is not supported (its ranks would have to load together)")
            try:
                staged = await asyncio.to_thread(self._stage, request)
            except IncompatibleCheckpoint:
                ctx.control.refuse_load()
                ctx.commit()
                await ctx.settle()
                raise
            if ctx.control.load_of(request.request_id) is None:  # a retry may have landed while this one copied
                ctx.running("load a checkpoint")
                replaced = ctx.control.latest_load
                ctx.control.load(CheckpointLoad(
                    load_id=request.request_id, source=str(staged.source), checkpoint=staged.checkpoint,
                    source_iteration=staged.signature.iteration, source_env_steps=staged.signature.env_steps,
                    env_steps=ctx.data.env_steps, wall_seconds=ctx.lifecycle.wall_seconds(ctx.clock())))
                ctx.commit()
                await ctx.settle()
                if replaced is not None and self.checkpoints is not None:  # learners take up the latest load only
                    await asyncio.to_thread(self.checkpoints.delete, replaced.path)
        return await ctx.settled(ctx.control.status())

    def _stage(self, request: LoadCheckpointRequest) -> _Staged:
        """(in a thread: file I/O) Check the source checkpoint against this run's, and copy it in."""
        if self.checkpoints is None:
            raise Conflict("this coordinator was started without access to its run's checkpoints store")
        source = self._source_dir(request.source)
        store = LocalStore(source / "checkpoints")
        names = [request.checkpoint] if request.checkpoint else _newest_first(store)
        if not names:
            raise NotFound(f"{source} has no checkpoints yet: ask that run for one (rlfleet ctl checkpoint)")
        for name in names:
            if store.size(name) is None:
                continue  # the newest was pruned since it was listed: the next newest
            theirs = _signature(store, name, f"{source}'s checkpoint {name}")
            ours_name = next(iter(_newest_first(self.checkpoints)), None)
            if ours_name is None:
                raise Conflict("this run has no checkpoint yet to check the source against: ask it for one "
                               "(POST /v1/run/checkpoint, rlfleet ctl checkpoint) and retry")
            ours = _signature(self.checkpoints, ours_name, f"this run's checkpoint {ours_name}")
            why = incompatibility(theirs, ours)
            if why is not None:
                raise IncompatibleCheckpoint(f"{source}'s {name} does not fit this run: {why}")
            self.checkpoints.put(staged_path(request.request_id), store.get(name))
            return _Staged(source, name, theirs)
        raise NotFound(f"{source} has no checkpoint {request.checkpoint or ''} (its checkpoints: "
                       f"{', '.join(_newest_first(store)) or 'none'})")

    def _source_dir(self, given: str) -> Path:
        """The source run's directory, resolved, if it lies under a checkpoint source."""
        path = Path(given)
        if not path.is_absolute():
            raise Invalid(f"source {given!r} must be an absolute path (the source run's directory)")
        resolved = path.resolve()
        if not any(resolved.is_relative_to(root) for root in self.sources):
            raise Invalid(f"source {resolved} is outside this coordinator's checkpoint sources "
                            f"({', '.join(map(str, self.sources)) or 'none'}); add its directory to "
                            "RLFLEET_CHECKPOINT_SOURCES")
        if not (resolved / "checkpoints").is_dir():
            raise NotFound(f"{resolved} is not a run directory with a local checkpoints/ folder")
        return resolved


def _newest_first(store: PayloadStore) -> list[str]:
    """The store's checkpoints that carry a signature, newest first."""
    names = set(store.list_prefix(""))
    return sorted((n for n in names if CHECKPOINT_NAME.match(n) and signature_name(n) in names), reverse=True)


def _signature(store: PayloadStore, name: str, what: str) -> CheckpointSignature:
    if store.size(signature_name(name)) is None:
        raise Conflict(f"{what} has no signature (written before checkpoints were signed): ask that run for a "
                       "fresh checkpoint (rlfleet ctl checkpoint) and retry")
    try:
        return CheckpointSignature.model_validate_json(store.get(signature_name(name)))
    except ValidationError as exc:
        raise Conflict(f"{what}'s signature is unreadable ({exc.error_count()} errors): ask that run for a fresh "
                       "checkpoint") from None
