"""The control plane (admin scope): pause and resume collection, checkpoint now, evaluate (and test) now,
change the settings the run's algorithm declares live, and load another run's checkpoint. Stopping the run is in
routes/run.py."""

from __future__ import annotations

from fastapi import APIRouter

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import AdminScope, RunDep
from rlfleet.shared.wire import ControlStatus, EvaluateRequest, LoadCheckpointRequest, SettingsRequest

router = APIRouter(prefix="/v1/run", tags=["control"])
_ENDED = ("conflict", "journal_unavailable")  # 409: the run has ended


@router.post("/pause", response_model=ControlStatus, summary="Pause collection (collectors idle until resumed)",
             **route_doc("admin", "Collectors get a pause directive with their next reply and idle until "
                         "`resume`, waiting in a heartbeat long poll (`while_paused`) that the resume answers; the "
                         "learner trains on what is buffered. Repeating it changes nothing.", _ENDED,
                         response=ex.CONTROL))
async def pause(run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.ctx.settled(run.controls.pause(True))


@router.post("/resume", response_model=ControlStatus, summary="Resume collection after a pause",
             **route_doc("admin", "Answers the paused collectors' `while_paused` heartbeats at once: they collect "
                         "again within a round trip. Repeating it changes nothing.", _ENDED, response=ex.CONTROL))
async def resume(run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.ctx.settled(run.controls.pause(False))


@router.post("/checkpoint", response_model=ControlStatus, summary="Ask the learner to checkpoint now",
             **route_doc("admin", "Counts a checkpoint request; the learner sees the count in its directive and "
                         "checkpoints after its next update, once per request.", _ENDED, response=ex.CONTROL))
async def checkpoint(run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.ctx.settled(run.controls.checkpoint_now())


@router.post("/evaluate", response_model=ControlStatus,
             summary="Ask the evaluator to validate the latest policy now (and test it with `test`)",
             **route_doc("admin", "Counts an evaluation request; the evaluator validates the latest policy at "
                         "once on a fresh block of validation seeds. With `test`, the judge asks for the "
                         "held-out test of the version validated whatever its score; a test that reaches the "
                         "threshold solves the run as any other.", (*BODY, *_ENDED), ex.EVALUATE, ex.CONTROL))
async def evaluate(body: EvaluateRequest, run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.ctx.settled(run.controls.evaluate_now(body.test))


@router.patch("/settings", response_model=ControlStatus,
              summary="Change live settings (those the algorithm declares live); journalled, shown in status",
              **route_doc("admin", "Applies dotted run-config paths to the running run, all or none. Only the "
                          "settings the algorithm's registry entry declares live may change (`live_settings` in "
                          "the reply; another one is a 409 listing them); a value out of range is a 422 naming "
                          "the field and its bound. Each change is journalled, listed in status, and marks the "
                          "run as not reproducible; workers re-read their task to apply it.",
                          (*BODY, *_ENDED), ex.SETTINGS, ex.CONTROL))
async def settings(body: SettingsRequest, run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.ctx.settled(run.controls.change_settings(body.settings))


@router.post("/load-checkpoint", response_model=ControlStatus,
             summary="Continue training from another run's checkpoint (weights, optimizer, observation statistics)",
             **route_doc("admin", "The source is another run's directory under the coordinator's checkpoint "
                         "sources (`RLFLEET_CHECKPOINT_SOURCES`; a path outside them, links resolved, is a 422) and "
                         "one of its checkpoints, by default its latest. Its signature is compared with this run's "
                         "latest checkpoint's: another algorithm, other spaces, another network or any other tensor "
                         "shape is a 409 (`incompatible_checkpoint`) naming the difference, counted in "
                         "`load_refusals`; nothing is loaded. Without a checkpoint of its own the run cannot be "
                         "compared (409: ask for one with `/v1/run/checkpoint`). A compatible checkpoint is copied "
                         "into this run's checkpoints store and journalled; the learner continues from it after its "
                         "next update (its own counters kept), publishes and checkpoints. A retry with the same "
                         "`request_id` changes nothing.",
                         (*BODY, "not_found", "incompatible_checkpoint", *_ENDED), ex.LOAD_CHECKPOINT, ex.CONTROL))
async def load_checkpoint(body: LoadCheckpointRequest, run: RunDep, _: AdminScope) -> ControlStatus:
    return await run.checkpoint_loads.load(body)
