"""Reading a W&B offline run back (its run-<id>.wandb file), for tests: no network, no W&B account.

wandb 0.31 ships no Python reader of its transaction log (the old `wandb.sdk.internal.datastore` went with the
Python backend); `wandb sync` replays the file to a server. The file is W&B's documented record log: a 7-byte
header (":W&B", magic 0xBEE1, version 0), then 32 KiB blocks of LevelDB-log records (CRC-32C, length, type:
full, first, middle or last piece), each record one `wandb_internal_pb2.Record` protobuf. This reads it with
wandb's own protobuf classes; CRCs are not checked (a test reads what it has just written).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = struct.Struct("<4sHB")  # ident, magic, version
RECORD = struct.Struct("<IHB")  # CRC-32C, length, type
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    """What a test asks of an offline run: its history rows, config, tags, artifacts' files and summary."""

    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    project: str = ""
    name: str = ""
    artifacts: dict[str, list[str]] = field(default_factory=dict)  # artifact name -> its files' paths
    summary: dict[str, Any] = field(default_factory=dict)

    def curve(self, tag: str, axis: str = "env_steps") -> list[tuple[float, float]]:
        """(axis value, tag's value) of every history row holding `tag`."""
        return [(row[axis], row[tag]) for row in self.history if tag in row]


def _payloads(data: bytes) -> list[bytes]:
    ident, magic, version = HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), "not a W&B transaction log"
    at, pieces, records = HEADER.size, b"", []
    while at + RECORD.size <= len(data):
        if BLOCK - at % BLOCK < RECORD.size:  # too little left in the block for a header: zero padding
            at += BLOCK - at % BLOCK
            continue
        _, length, kind = RECORD.unpack_from(data, at)
        body = data[at + RECORD.size:at + RECORD.size + length]
        at += RECORD.size + length
        if kind == FULL:
            records.append(body)
        elif kind == FIRST:
            pieces = body
        elif kind == MIDDLE:
            pieces += body
        elif kind == LAST:
            records.append(pieces + body)
        else:  # zeros past the last record
            break
    return records


def _nested(key: str, nested: Any) -> str:
    return "/".join(nested) if nested else key


def read_offline_run(run_dir: Path) -> OfflineRun:
    """The offline run under `run_dir` (RUN_DIR/wandb/offline-run-*/run-*.wandb; exactly one expected)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    run = OfflineRun()
    for payload in _payloads(path.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            run.history.append({_nested(i.key, i.nested_key): json.loads(i.value_json) for i in record.history.item})
        elif kind == "run":
            run.project, run.name, run.tags = record.run.project, record.run.display_name, list(record.run.tags)
            run.config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            run.config.update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "artifact":
            run.artifacts[record.artifact.name] = [entry.path for entry in record.artifact.manifest.contents]
        elif kind == "summary":
            run.summary.update({_nested(i.key, i.nested_key): json.loads(i.value_json) for i in record.summary.update})
    return run
