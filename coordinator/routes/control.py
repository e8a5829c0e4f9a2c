"""The control plane (admin scope): pause and resume collection, checkpoint now, evaluate (and test) now, and
change the settings the run's algorithm declares live. Stopping the run is in routes/run.py."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.deps import AdminScope, RunDep
from shared.wire import ControlStatus, EvaluateRequest, SettingsRequest

router = APIRouter(prefix="/v1/run", tags=["control"])


@router.post("/pause", response_model=ControlStatus, summary="Pause collection (collectors idle until resumed)")
async def pause(run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.settled(run.pause(True))


@router.post("/resume", response_model=ControlStatus, summary="Resume collection after a pause")
async def resume(run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.settled(run.pause(False))


@router.post("/checkpoint", response_model=ControlStatus, summary="Ask the learner to checkpoint now")
async def checkpoint(run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.settled(run.checkpoint_now())


@router.post("/evaluate", response_model=ControlStatus,
             summary="Ask the evaluator to validate the latest policy now (and test it with `test`)")
async def evaluate(body: EvaluateRequest, run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.settled(run.evaluate_now(body.test))


@router.patch("/settings", response_model=ControlStatus,
              summary="Change live settings (those the algorithm declares live); journalled, shown in status")
async def settings(body: SettingsRequest, run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.settled(run.change_settings(body.settings))
