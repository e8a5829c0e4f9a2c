"""What the coordinator's curve writers are tested with: a run status to record, and the scalar tags TensorBoard
event files hold."""

from __future__ import annotations

import struct
from pathlib import Path

from rlfleet.shared.wire import LearnerStatus, PolicyLagStatus, Status


def status(iteration: int, losses: dict[str, float], env_steps: int) -> Status:
    return Status.model_construct(
        wall_seconds=1.5, env_steps=env_steps, env_steps_per_second=10.0, episodes=3, chunks=2,
        recent_return_mean=None, policy_version=1, latest_evaluation=None, buffers=[],
        policy_lag=PolicyLagStatus(ingest_mean=0.5, ingest_max=1, sampled_mean=0.0, sampled_max=0, ingest_histogram={}),
        learner=LearnerStatus(iteration=iteration, transitions_trained=64 * iteration, losses=losses,
                              samples_per_insert=8.0))


def tensorboard_tags(logdir: Path) -> set[str]:
    """Scalar tags in tensorboardX event files (TFRecord framing: length, its CRC, the event, its CRC)."""
    from tensorboardX.proto import event_pb2

    tags = set()
    for path in logdir.glob("events.*"):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = event_pb2.Event.FromString(data[at + 12:at + 12 + length])
            tags.update(value.tag for value in event.summary.value)
            at += 12 + length + 4
    return tags
