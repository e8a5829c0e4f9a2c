"""The data plane: collectors report chunks, the learner samples them and reports what it learned."""

from __future__ import annotations

from fastapi import APIRouter, Response

from coordinator.deps import CollectorScope, LearnerScope, RunDep
from coordinator.errors import NotFound
from shared.wire import (
    Ack,
    ChunkAck,
    ChunkBatch,
    ChunkBatchAck,
    ChunkReport,
    CorruptAck,
    CorruptReport,
    LearnReport,
    PriorityAck,
    PriorityUpdate,
    SampleRequest,
    SampleResponse,
)

router = APIRouter(prefix="/v1", tags=["data"])


@router.post("/chunks", response_model=ChunkAck, summary="Acknowledge a chunk already written to the store")
async def report_chunk(body: ChunkReport, run: RunDep, _: CollectorScope) -> ChunkAck:
    return await run.ingest_one(body)


@router.post("/chunk-batches", response_model=ChunkBatchAck,
             summary="Acknowledge several chunks in one request (each accepted or refused on its own)")
async def report_chunks(body: ChunkBatch, run: RunDep, _: CollectorScope) -> ChunkBatchAck:
    return await run.ingest_batch(body.reports)


def _check_buffer(buffer_id: str, run: RunDep) -> None:
    if buffer_id != run.data.buffer.buffer_id:
        raise NotFound(f"buffer {buffer_id!r} does not exist; use the buffer_id of your learner task")


@router.post("/buffers/{buffer_id}/sample", response_model=SampleResponse,
             summary="Sample item references (409 not_enough_data while the rate limiter holds)")
async def sample(buffer_id: str, body: SampleRequest, run: RunDep, _: LearnerScope) -> Response:
    _check_buffer(buffer_id, run)
    return Response(content=await run.sample_waiting(body), media_type="application/json")


@router.post("/buffers/{buffer_id}/priorities", response_model=PriorityAck,
             summary="Set priorities of sampled items by id (ids evicted since are ignored and counted)")
async def priorities(buffer_id: str, body: PriorityUpdate, run: RunDep, _: LearnerScope) -> PriorityAck:
    _check_buffer(buffer_id, run)
    return await run.settled(run.update_priorities(body))


@router.post("/buffers/{buffer_id}/corrupt", response_model=CorruptAck,
             summary="Report a sampled payload as unusable: the chunk leaves the buffer, its producer is counted")
async def corrupt(buffer_id: str, body: CorruptReport, run: RunDep, _: LearnerScope) -> CorruptAck:
    _check_buffer(buffer_id, run)
    return await run.settled(run.report_corrupt(body))


@router.post("/learn-info", response_model=Ack, summary="Report learner progress and losses")
async def learn_info(body: LearnReport, run: RunDep, _: LearnerScope) -> Ack:
    return await run.settled(run.learn_report(body))
