"""shared.wire.limits: a batch's size is what the client sends, and a report's bound holds for the widest
report the wire models accept."""

from __future__ import annotations

from rlfleet.shared.wire import ChunkBatch, ChunkReport, EpisodeStat, batch_bytes, report_bytes_bound


def _report(chunk_id: str, rows: int, num_envs: int = 1, every_row_ends: bool = False) -> ChunkReport:
    ends = list(range(rows)) if every_row_ends else [rows - 1]
    episodes = [EpisodeStat(ret=-1.2345678901234567e-05, length=2**31 - 1, opponent="v" + "9" * 16)
                for _ in ends]
    return ChunkReport(chunk_id=chunk_id, worker_id="w" * 128, task_id="t" * 128,
                       payload_path="/".join(["p" * 128] * 8), sha256="0" * 64, size_bytes=2**53, env_steps=rows,
                       num_envs=num_envs, ends=ends, fresh_columns=list(range(num_envs)), episodes=episodes,
                       policy_version=2**53, env_errors=rows)


def test_a_batchs_size_is_the_json_the_client_sends() -> None:
    for count in (1, 2, 5):
        reports = [_report(f"c{i}" * (i + 1), rows=10 * (i + 1)) for i in range(count)]
        sizes = [len(r.model_dump_json()) for r in reports]
        assert batch_bytes(sizes) == len(ChunkBatch(reports=reports).model_dump_json())


def test_the_bound_holds_for_the_widest_report() -> None:
    for rows, num_envs in ((1, 1), (100, 4), (2048, 8), (5000, 50)):
        widest = len(_report("c" * 128, rows, num_envs, every_row_ends=True).model_dump_json())
        bound = report_bytes_bound(num_envs, rows)
        assert widest <= bound <= widest * 1.01 + 64, (rows, num_envs, widest, bound)
