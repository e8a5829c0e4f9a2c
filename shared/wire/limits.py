"""What one request may weigh: the coordinator's body limit, and the most a single chunk report can weigh.

The coordinator refuses bodies above its `max_body_bytes` (413) before reading them. A chunk report's own size
grows with its chunk (an episode end and an episode's stats per row, at worst), so a collector must know the
limit to split a batch of reports (the coordinator serves it in the collector's task), and a run config whose
chunks could make even one report too large is refused before the run starts.
"""

from __future__ import annotations

from functools import cache

from rlfleet.shared.wire.chunks import ChunkReport, EpisodeStat

MAX_BODY_BYTES = 4 * 1024 * 1024  # the coordinator's default max_body_bytes
BATCH_HEAD, BATCH_TAIL = b'{"reports":[', b"]}"  # a ChunkBatch's JSON around its reports, comma-separated

# The widest values the wire models allow where they matter: a return's JSON is at most 24 characters
# (-1.2345678901234567e-05 is written -0.000012345678901234568), an episode is taken to last under 2**31 steps.
_WIDEST_RETURN = -1.2345678901234567e-05
_LONGEST_LENGTH = 2**31 - 1
_LONGEST_OPPONENT = "v" + "9" * 16
_LONGEST_ID = "a" * 128
_LONGEST_PATH = "/".join(["a" * 128] * 8)


@cache
def _episode_bytes() -> int:
    """One episode's stats at their widest, with the comma that separates it from the next."""
    widest = EpisodeStat(ret=_WIDEST_RETURN, length=_LONGEST_LENGTH, opponent=_LONGEST_OPPONENT)
    return len(widest.model_dump_json()) + 1


def report_bytes_bound(num_envs: int, rows: int) -> int:
    """The most bytes one chunk report of `num_envs` env columns and `rows` rows can take as JSON: the longest
    ids and path, and every row ending an episode (one entry in `ends`, one in `episodes`, each at its widest)."""
    fixed = ChunkReport.model_construct(  # not validated: `rows` may be past what a report may carry
        chunk_id=_LONGEST_ID, worker_id=_LONGEST_ID, task_id=_LONGEST_ID, payload_path=_LONGEST_PATH,
        sha256="0" * 64, size_bytes=2**53, env_steps=rows, num_envs=num_envs, ends=[], fresh_columns=[],
        episodes=[], policy_version=2**53, env_errors=rows)
    episodes = min(rows, _episodes_limit())
    return (len(fixed.model_dump_json()) + rows * (len(str(rows - 1)) + 1) + num_envs * (len(str(num_envs - 1)) + 1)
            + episodes * _episode_bytes())


def batch_bytes(report_sizes: list[int]) -> int:
    """Bytes of a ChunkBatch's JSON holding reports of these JSON sizes."""
    return len(BATCH_HEAD) + sum(report_sizes) + max(0, len(report_sizes) - 1) + len(BATCH_TAIL)


@cache
def _episodes_limit() -> int:
    """`ChunkReport.episodes`' bound on its length, read from the model so the number lives in one place."""
    bounds = [m.max_length for m in ChunkReport.model_fields["episodes"].metadata if hasattr(m, "max_length")]
    return min(bounds)
