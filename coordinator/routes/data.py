"""The data plane: collectors report chunks, the learner samples them and reports what it learned."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.deps import CollectorScope, LearnerScope, RunDep
from coordinator.errors import NotFound
from shared.wire import (
    Ack,
    ChunkAck,
    ChunkReport,
    LearnReport,
    PriorityAck,
    PriorityUpdate,
    SampleRequest,
    SampleResponse,
)

router = APIRouter(prefix="/v1", tags=["data"])


@router.post("/chunks", response_model=ChunkAck, summary="Acknowledge a chunk already written to the store")
def report_chunk(body: ChunkReport, run: RunDep, _: CollectorScope) -> ChunkAck:
    return run.ingest(body)


def _check_buffer(buffer_id: str, run: RunDep) -> None:
    if buffer_id != run.buffer.buffer_id:
        raise NotFound(f"buffer {buffer_id!r} does not exist; use the buffer_id of your learner task")


@router.post("/buffers/{buffer_id}/sample", response_model=SampleResponse,
             summary="Sample item references (409 not_enough_data while the rate limiter holds)")
def sample(buffer_id: str, body: SampleRequest, run: RunDep, _: LearnerScope) -> SampleResponse:
    _check_buffer(buffer_id, run)
    return run.sample(body)


@router.post("/buffers/{buffer_id}/priorities", response_model=PriorityAck,
             summary="Set priorities of sampled items by id (ids evicted since are ignored and counted)")
def priorities(buffer_id: str, body: PriorityUpdate, run: RunDep, _: LearnerScope) -> PriorityAck:
    _check_buffer(buffer_id, run)
    return run.update_priorities(body)


@router.post("/learn-info", response_model=Ack, summary="Report learner progress and losses")
def learn_info(body: LearnReport, run: RunDep, _: LearnerScope) -> Ack:
    return run.learn_report(body)
