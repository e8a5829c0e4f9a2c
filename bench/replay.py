"""Replay benchmarks: the prioritized buffer in one process at 1M transitions, then the coordinator's sample
endpoint while collectors push chunks as fast as they can.

  python bench/replay.py [--entries 1000000] [--repeats 500] [--load-seconds 20] [--out bench/results/replay.json]

1. In process: a prioritized ReplayBuffer (unit transition, alpha 0.6) with capacity --entries, filled with
   chunks of 2048 transitions (8 envs x 256 steps, episode ends on a random 2% of rows) until it is full.
   Reported: insert rate (median over the chunks), update_priorities(256 random live ids) latency,
   sample(rng, 256, beta=0.4) latency on the full buffer (--repeats calls each, perf_counter_ns), and bytes
   per entry two ways: the nbytes of the buffer's arrays (ids, chunk_key, length, uses, sum/min trees) over
   the capacity, and the process RSS growth from before the buffer existed to after filling it (which also
   counts the per-chunk Python objects).
   Targets: sample(256) median < 2 ms; < 250 bytes per entry.
2. Over REST: a real coordinator (`python -m rlfleet.launcher coordinator`, uvicorn on 127.0.0.1, prioritized DQN
   run, capacity 100,000, samples_per_insert and tolerance set so the rate limiter never holds anyone back),
   prefilled to capacity, then --collectors collector processes (register, claim, write 2048-transition
   payloads into the store, POST /v1/chunks) for --load-seconds while one learner client loops over
   POST /v1/buffers/replay-0/sample (64 x 16) and POSTs priorities for the returned ids. Reported: sample
   latency median/p99 under that load, the same for --idle-seconds with no collectors, and the ingest rate.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import math
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NUM_ENVS = 8
CHUNK_STEPS = 256
CHUNK_ROWS = NUM_ENVS * CHUNK_STEPS  # 2048 transitions per chunk
END_FRACTION = 0.02
SAMPLE_TARGET_MS = 2.0
BYTES_TARGET = 250.0
TOKEN_ENV = "RLFLEET_BENCH_TOKEN"  # how a collector subprocess gets its token (not on the command line)


# ----- small helpers ----------------------------------------------------------------------------------------
def rss_bytes() -> int:
    """Resident set size of this process: psutil if installed, else VmRSS from /proc/self/status."""
    try:
        import psutil
    except ImportError:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("cannot read the RSS: no psutil and no VmRSS in /proc/self/status") from None
    return int(psutil.Process().memory_info().rss)


def latency_stats(ns: list[int]) -> dict[str, float]:
    """Median / p99 / mean / max in milliseconds of perf_counter_ns durations."""
    if not ns:
        return {"n": 0, "median_ms": math.nan, "p99_ms": math.nan, "mean_ms": math.nan, "max_ms": math.nan}
    ms = np.asarray(ns, np.float64) / 1e6
    return {"n": len(ns), "median_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()), "max_ms": float(ms.max())}


def random_ends(rng: np.random.Generator, rows: int = CHUNK_ROWS) -> list[int]:
    """A random 2% of the chunk's rows, ascending: the flat indices where an env's episode ended."""
    count = max(1, round(rows * END_FRACTION))
    return np.sort(rng.choice(rows, count, replace=False)).tolist()


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_table(title: str, rows: Sequence[tuple[str, ...]]) -> None:
    print(f"\n{title}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))


def fmt_ms(value: float) -> str:
    return f"{value:.3f} ms"


# ----- 1. the buffer in process -----------------------------------------------------------------------------
def make_entry(rng: np.random.Generator) -> Any:
    from rlfleet.coordinator.replay.buffer import Entry
    from rlfleet.shared.storage.layout import chunk_path

    chunk_id = uuid.uuid4().hex
    return Entry(chunk_id=chunk_id, payload_path=chunk_path("bench-task", chunk_id), sha256=os.urandom(32).hex(),
                 transitions=CHUNK_ROWS, policy_version=0, num_envs=NUM_ENVS, ends=tuple(random_ends(rng)))


def profile_top(fn: Any, calls: int, lines: int = 18) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(lines)
    return out.getvalue().strip()


def bench_buffer(entries: int, repeats: int, seed: int, profile: bool) -> dict[str, Any]:
    from rlfleet.coordinator.replay.buffer import ReplayBuffer
    from rlfleet.coordinator.replay.samplers import ProportionalSampler
    from rlfleet.shared.config.run_config import ReplayConfig, SamplingConfig

    rng = np.random.default_rng(seed)
    replay = ReplayConfig(capacity_transitions=entries, sampler="prioritized", alpha=0.6)
    sampling = SamplingConfig(unit="transition")
    make_entry(rng)  # import and warm everything make_entry touches before the RSS baseline
    gc.collect()
    rss_before = rss_bytes()
    buffer = ReplayBuffer("bench", replay, sampling)

    chunks = math.ceil(entries / CHUNK_ROWS)  # the last one wraps around: the ring is full, FIFO eviction ran
    insert_ns: list[int] = []
    for _ in range(chunks):
        entry = make_entry(rng)
        t0 = time.perf_counter_ns()
        buffer.add(entry)
        insert_ns.append(time.perf_counter_ns() - t0)
    gc.collect()
    rss_after = rss_bytes()
    assert buffer.transitions == entries and buffer.items == entries, (buffer.transitions, buffer.items)

    storage = buffer.storage
    live_ids = storage.ids[storage.length > 0]
    update_ns: list[int] = []
    for k in range(repeats + 5):
        ids = live_ids[rng.integers(0, len(live_ids), 256)]
        priorities = np.abs(rng.standard_normal(256))
        t0 = time.perf_counter_ns()
        updated = buffer.update_priorities(ids, priorities)
        if k >= 5:  # the first few are warm-up
            update_ns.append(time.perf_counter_ns() - t0)
        assert updated == 256, updated

    sample_ns: list[int] = []
    for k in range(repeats + 5):
        t0 = time.perf_counter_ns()
        drawn = buffer.sample(rng, 256, beta=0.4)
        if k >= 5:
            sample_ns.append(time.perf_counter_ns() - t0)
        assert len(drawn.ids) == 256, len(drawn.ids)

    sampler = buffer.sampler
    assert isinstance(sampler, ProportionalSampler)
    arrays = {"ids": storage.ids.nbytes, "chunk_key": storage.chunk_key.nbytes, "length": storage.length.nbytes,
              "uses": buffer.max_use.uses.nbytes, "tree": sampler.tree.nbytes}
    array_bytes = sum(arrays.values())
    rss_growth = rss_after - rss_before
    insert_s = np.asarray(insert_ns, np.float64) / 1e9
    result: dict[str, Any] = {
        "capacity": entries, "chunk_transitions": CHUNK_ROWS, "chunks_inserted": chunks,
        "chunks_live": len(buffer), "evicted_chunks": buffer.overwrite.evicted,
        "insert_entries_per_second_median": float(np.median(CHUNK_ROWS / insert_s)),
        "insert_chunk_ms_median": float(np.median(insert_s) * 1e3),
        "insert_chunk_ms_p99": float(np.percentile(insert_s, 99) * 1e3),
        "update_priorities_256": latency_stats(update_ns),
        "sample_256": latency_stats(sample_ns),
        "array_bytes": arrays,
        "bytes_per_entry_arrays": array_bytes / entries,
        "rss_growth_bytes": rss_growth,
        "bytes_per_entry_rss": rss_growth / entries,
        "python_bytes_per_chunk_estimate": (rss_growth - array_bytes) / len(buffer),
    }
    sample_ok = result["sample_256"]["median_ms"] < SAMPLE_TARGET_MS
    result["targets"] = {
        "sample_256_median_ms": {"target": SAMPLE_TARGET_MS, "measured": result["sample_256"]["median_ms"],
                                 "pass": sample_ok},
        "bytes_per_entry_arrays": {"target": BYTES_TARGET, "measured": result["bytes_per_entry_arrays"],
                                   "pass": result["bytes_per_entry_arrays"] < BYTES_TARGET},
        "bytes_per_entry_rss": {"target": BYTES_TARGET, "measured": result["bytes_per_entry_rss"],
                                "pass": result["bytes_per_entry_rss"] < BYTES_TARGET},
    }
    if profile or not sample_ok:
        result["sample_profile"] = profile_top(lambda: buffer.sample(rng, 256, beta=0.4), repeats)
    return result


def report_buffer(r: dict[str, Any]) -> None:
    s, u, t = r["sample_256"], r["update_priorities_256"], r["targets"]
    print_table(f"In-process prioritized ReplayBuffer: capacity {r['capacity']:,} transitions, unit transition, "
                f"alpha 0.6, {r['chunks_inserted']} chunks of {r['chunk_transitions']} "
                f"({r['chunks_live']} live)", [
        ("metric", "median", "p99", "target", "result"),
        ("insert (entries/s, per chunk)", f"{r['insert_entries_per_second_median']:,.0f}/s",
         "", "", ""),
        ("insert one 2048-row chunk", fmt_ms(r["insert_chunk_ms_median"]), fmt_ms(r["insert_chunk_ms_p99"]), "", ""),
        ("update_priorities(256 ids)", fmt_ms(u["median_ms"]), fmt_ms(u["p99_ms"]), "", ""),
        ("sample(256, beta=0.4)", fmt_ms(s["median_ms"]), fmt_ms(s["p99_ms"]), f"< {SAMPLE_TARGET_MS:g} ms",
         verdict(t["sample_256_median_ms"]["pass"])),
        ("bytes/entry (array nbytes)", f"{r['bytes_per_entry_arrays']:.1f} B", "", f"< {BYTES_TARGET:g} B",
         verdict(t["bytes_per_entry_arrays"]["pass"])),
        ("bytes/entry (RSS growth)", f"{r['bytes_per_entry_rss']:.1f} B", "", f"< {BYTES_TARGET:g} B",
         verdict(t["bytes_per_entry_rss"]["pass"])),
    ])
    parts = ", ".join(f"{k} {v / r['capacity']:.1f}" for k, v in r["array_bytes"].items())
    print(f"  array bytes per entry: {parts}; RSS growth {r['rss_growth_bytes'] / 2**20:.1f} MiB; "
          f"~{r['python_bytes_per_chunk_estimate']:,.0f} B of Python objects per live chunk")
    if "sample_profile" in r:
        print("\ncProfile of sample(256), by own time:\n" + r["sample_profile"])


# ----- 2. the coordinator under load ------------------------------------------------------------------------
class FakeCollector:
    """Speaks the collector's REST protocol without environments: register, claim, then write payloads and
    report them. Payload rows are random but consistent with the reported ends (terminated there)."""

    def __init__(self, url: str, token: str, store_root: Path, name: str, seed: int) -> None:
        import httpx

        from rlfleet.shared.storage.local import LocalStore

        self.http = httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {token}"})
        self.store = LocalStore(store_root)
        self.name = name
        self.rng = np.random.default_rng(seed)
        shape = (CHUNK_STEPS, NUM_ENVS)
        self.arrays: dict[str, np.ndarray] = {
            "obs": self.rng.standard_normal((*shape, 4)).astype(np.float32),
            "actions": self.rng.integers(0, 2, shape).astype(np.int64),
            "rewards": np.ones(shape, np.float32),
            "terminated": np.zeros(shape, bool),
            "truncated": np.zeros(shape, bool),
            "next_obs": self.rng.standard_normal((*shape, 4)).astype(np.float32),
            "valid": np.ones(shape, bool),
        }
        self.worker_id = self.task_id = ""

    def register(self) -> None:
        resp = self.http.post("/v1/workers", json={"kind": "collector", "name": self.name})
        resp.raise_for_status()
        self.worker_id = resp.json()["worker_id"]
        resp = self.http.post(f"/v1/workers/{self.worker_id}/claim")
        resp.raise_for_status()
        task = resp.json()["task"]
        if task is None:
            raise RuntimeError(f"{self.name}: no collector task to claim")
        self.task_id = task["task_id"]

    def post_chunk(self) -> dict[str, Any]:
        """Write one payload, report it; returns the ack (raises on any non-200)."""
        from rlfleet.shared.payloads.codec import encode_chunk
        from rlfleet.shared.storage.layout import chunk_path

        chunk_id = uuid.uuid4().hex
        path = chunk_path(self.task_id, chunk_id)
        ends = random_ends(self.rng)
        terminated = np.zeros(CHUNK_ROWS, bool)
        terminated[ends] = True
        arrays = {**self.arrays, "terminated": terminated.reshape(CHUNK_STEPS, NUM_ENVS)}
        data = encode_chunk(arrays, {"task_id": self.task_id, "chunk_id": chunk_id, "policy_version": 0})
        sha = self.store.put(path, data)
        report = {
            "chunk_id": chunk_id, "worker_id": self.worker_id, "task_id": self.task_id, "payload_path": path,
            "sha256": sha, "size_bytes": len(data), "env_steps": CHUNK_ROWS, "num_envs": NUM_ENVS, "ends": ends,
            "fresh_columns": [], "episodes": [{"ret": 20.0, "length": 20} for _ in ends], "policy_version": 0,
        }
        resp = self.http.post("/v1/chunks", json=report)
        if resp.status_code != 200:
            raise RuntimeError(f"POST /v1/chunks: {resp.status_code} {resp.text[:300]}")
        return resp.json()

    def close(self) -> None:
        self.http.close()


def collector_worker(url: str, store_root: Path, index: int, sync_dir: Path) -> None:
    """One collector process: register and claim, signal ready, wait for the go file (it holds the wall-clock
    deadline), then post chunks until the deadline. Prints one JSON line of counts and latencies."""
    collector = FakeCollector(url, os.environ[TOKEN_ENV], store_root, f"bench-collector-{index}", seed=1000 + index)
    try:
        collector.register()
        (sync_dir / f"ready-{index}").touch()
        go, give_up = sync_dir / "go", time.monotonic() + 120
        while not go.exists():
            if time.monotonic() > give_up:
                raise RuntimeError("no go signal within 120 s")
            time.sleep(0.005)
        deadline = float(go.read_text())
        chunk_ns: list[int] = []
        duplicates = paused = errors = 0
        first_error = ""
        started = time.time()
        while time.time() < deadline:
            t0 = time.perf_counter_ns()
            try:
                ack = collector.post_chunk()
            except Exception as exc:  # counted and reported; a benchmark keeps going
                errors += 1
                first_error = first_error or repr(exc)[:300]
                time.sleep(0.05)
                continue
            chunk_ns.append(time.perf_counter_ns() - t0)
            duplicates += bool(ack["duplicate"])
            paused += ack["directive"]["pause_seconds"] > 0
        print(json.dumps({"index": index, "chunks": len(chunk_ns), "duplicates": duplicates, "paused": paused,
                          "errors": errors, "first_error": first_error, "started": started, "ended": time.time(),
                          "chunk_ns": chunk_ns}), flush=True)
    finally:
        collector.close()


class Learner:
    """The learner's side of the protocol: sample, then report priorities for the ids it got."""

    def __init__(self, url: str, token: str, seed: int) -> None:
        import httpx

        self.http = httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {token}"})
        self.rng = np.random.default_rng(seed)
        resp = self.http.post("/v1/workers", json={"kind": "learner", "name": "bench-learner"})
        resp.raise_for_status()
        self.worker_id = resp.json()["worker_id"]
        resp = self.http.post(f"/v1/workers/{self.worker_id}/claim")
        resp.raise_for_status()
        task = resp.json()["task"]
        if task is None or task["kind"] != "learner":
            raise RuntimeError(f"the learner could not claim its task: {resp.text[:300]}")
        self.buffer_id = task["buffer_id"]

    def loop(self, until: float, batch_size: int, num_batches: int) -> dict[str, Any]:
        """Sample + priorities until the wall-clock time `until`; latencies of successful calls only."""
        import httpx

        sample_ns: list[int] = []
        priority_ns: list[int] = []
        not_enough = errors = items = 0
        first_error = ""
        request = {"worker_id": self.worker_id, "batch_size": batch_size, "num_batches": num_batches}
        while time.time() < until:
            t0 = time.perf_counter_ns()
            try:
                resp = self.http.post(f"/v1/buffers/{self.buffer_id}/sample", json=request)
            except httpx.HTTPError as exc:  # e.g. a timeout: counted, and the loop stays bounded by `until`
                errors += 1
                first_error = first_error or f"sample: {exc!r}"
                continue
            elapsed = time.perf_counter_ns() - t0
            if resp.status_code == 409:
                not_enough += 1
                continue
            if resp.status_code != 200:
                errors += 1
                first_error = first_error or f"sample: {resp.status_code} {resp.text[:300]}"
                time.sleep(0.05)
                continue
            sample_ns.append(elapsed)
            ids = resp.json()["ids"]
            items += len(ids)
            update = {"worker_id": self.worker_id, "ids": ids,
                      "priorities": np.abs(self.rng.standard_normal(len(ids))).tolist()}
            t0 = time.perf_counter_ns()
            try:
                resp = self.http.post(f"/v1/buffers/{self.buffer_id}/priorities", json=update)
            except httpx.HTTPError as exc:
                errors += 1
                first_error = first_error or f"priorities: {exc!r}"
                continue
            if resp.status_code == 200:
                priority_ns.append(time.perf_counter_ns() - t0)
            else:
                errors += 1
                first_error = first_error or f"priorities: {resp.status_code} {resp.text[:300]}"
        return {"sample": latency_stats(sample_ns), "priorities": latency_stats(priority_ns),
                "sampled_items": items, "not_enough_data": not_enough, "errors": errors, "first_error": first_error}

    def close(self) -> None:
        self.http.close()


def wait_ready(url: str, proc: subprocess.Popen, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the coordinator exited with {proc.returncode} before it was ready")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the coordinator was not ready within {timeout:g} s")


def buffer_status(url: str, token: str) -> dict[str, Any]:
    import httpx

    resp = httpx.get(f"{url}/v1/status", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    resp.raise_for_status()
    status = resp.json()
    return {"env_steps": status["env_steps"], "chunks": status["chunks"], **status["buffers"][0]}


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench_coordinator(load_seconds: float, idle_seconds: float, collectors: int, capacity: int,
                      seed: int) -> dict[str, Any]:
    from rlfleet.launcher.up import free_port
    from rlfleet.shared.config.run_config import RunConfig, dump_run_config
    from rlfleet.shared.storage.layout import RunLayout
    from rlfleet.shared.tokens import generate_tokens_file

    batch_size, num_batches = 64, 16
    tmp = Path(tempfile.mkdtemp(prefix="rlfleet-bench-replay-"))
    procs: list[subprocess.Popen] = []
    logs: list[Any] = []
    learner: Learner | None = None
    try:
        data_dir, sync_dir = tmp / "data", tmp / "sync"
        sync_dir.mkdir()
        tokens = generate_tokens_file(data_dir / "tokens.json")  # what `rlfleet secrets --out` does
        config = RunConfig.model_validate({
            "name": "bench-replay", "seed": seed, "algo": "dqn",
            "collector": {"num_envs": NUM_ENVS, "chunk_steps": CHUNK_STEPS},
            "replay": {"capacity_transitions": capacity, "min_transitions": 1000, "samples_per_insert": 1000,
                       "tolerance_transitions": 10**9, "sampler": "prioritized", "alpha": 0.6},
            "dqn": {"batch_size": batch_size, "batches_per_request": num_batches},
            "budget": {"max_env_steps": 10**12, "max_wall_seconds": 10**7},
        })
        config_file = tmp / "run.yaml"
        config_file.write_text(dump_run_config(config))
        store_root = RunLayout(data_dir, config.name).store_root
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("RLFLEET_")}
        base_env["PYTHONUNBUFFERED"] = "1"
        coordinator_log = open(tmp / "coordinator.log", "wb")  # noqa: SIM115 - closed in finally
        logs.append(coordinator_log)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "rlfleet.launcher", "coordinator"], cwd=REPO, stdin=subprocess.DEVNULL,
            stdout=coordinator_log, stderr=subprocess.STDOUT,
            env={**base_env, "RLFLEET_CONFIG": str(config_file), "RLFLEET_RUN": config.name,
                 "RLFLEET_DATA_DIR": str(data_dir),
                 "RLFLEET_TOKENS_FILE": str(data_dir / "tokens.json"), "RLFLEET_HOST": "127.0.0.1",
                 "RLFLEET_PORT": str(port)}))
        wait_ready(url, procs[0], 60)

        # Prefill to capacity (plus one chunk, so FIFO eviction is already running when the load starts).
        prefill = FakeCollector(url, tokens["collector"], store_root, "bench-prefill", seed)
        try:
            prefill.register()
            for _ in range(math.ceil(capacity / CHUNK_ROWS) + 1):
                prefill.post_chunk()
        finally:
            prefill.close()
        learner = Learner(url, tokens["learner"], seed)

        collector_log = open(tmp / "collectors.log", "wb")  # noqa: SIM115 - closed in finally
        logs.append(collector_log)
        workers = []
        for i in range(collectors):
            workers.append(subprocess.Popen(
                [sys.executable, __file__, "--collector-worker", str(i), "--url", url, "--store-root",
                 str(store_root), "--sync-dir", str(sync_dir)], cwd=REPO, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=collector_log, text=True,
                env={**base_env, TOKEN_ENV: tokens["collector"]}))
            procs.append(workers[-1])
        give_up = time.monotonic() + 60
        while not all((sync_dir / f"ready-{i}").exists() for i in range(collectors)):
            dead = [w.returncode for w in workers if w.poll() is not None]
            if dead or time.monotonic() > give_up:
                raise RuntimeError(f"collectors not ready (exit codes {dead}); see {tmp / 'collectors.log'}")
            time.sleep(0.02)

        before = buffer_status(url, tokens["admin"])
        go_time = time.time()
        until = go_time + load_seconds
        (sync_dir / "go.tmp").write_text(repr(until))
        (sync_dir / "go.tmp").rename(sync_dir / "go")
        loaded = learner.loop(until, batch_size, num_batches)

        results = []
        for w in workers:
            out, _ = w.communicate(timeout=60)
            if w.returncode != 0 or not out.strip():
                raise RuntimeError(f"a collector failed (exit {w.returncode}); see {tmp / 'collectors.log'}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        window = max(r["ended"] for r in results) - go_time
        after = buffer_status(url, tokens["admin"])
        idle = learner.loop(time.time() + idle_seconds, batch_size, num_batches) if idle_seconds > 0 else None

        chunks = sum(r["chunks"] for r in results)
        coordinator_ok = procs[0].poll() is None
        return {
            "collectors": collectors, "load_seconds": load_seconds, "window_seconds": window,
            "capacity": capacity, "batch_size": batch_size, "num_batches": num_batches,
            "under_load": loaded, "idle": idle,
            "chunks_acked": chunks, "chunks_per_second": chunks / window,
            "transitions_per_second": chunks * CHUNK_ROWS / window,
            "status_env_steps_per_second": (after["env_steps"] - before["env_steps"]) / window,
            "chunk_post": latency_stats([ns for r in results for ns in r["chunk_ns"]]),
            "collector_errors": sum(r["errors"] for r in results),
            "collector_first_error": next((r["first_error"] for r in results if r["first_error"]), ""),
            "collector_pause_directives": sum(r["paused"] for r in results),
            "duplicates": sum(r["duplicates"] for r in results),
            "per_collector_chunks": [r["chunks"] for r in results],
            "buffer_after": after, "coordinator_alive_at_end": coordinator_ok,
        }
    except Exception:
        log_file = tmp / "coordinator.log"
        if log_file.exists():
            print("--- coordinator log (tail)\n" + log_file.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        if learner is not None:
            learner.close()
        for proc in reversed(procs):  # collectors first, the coordinator last
            stop_process(proc)
        for fh in logs:
            fh.close()
        shutil.rmtree(tmp, ignore_errors=True)


def report_coordinator(r: dict[str, Any]) -> None:
    load, idle = r["under_load"], r["idle"]
    rows = [("call", "calls", "median", "p99", "max"),
            ("sample 64x16, under load", str(load["sample"]["n"]), fmt_ms(load["sample"]["median_ms"]),
             fmt_ms(load["sample"]["p99_ms"]), fmt_ms(load["sample"]["max_ms"])),
            ("priorities 1024, under load", str(load["priorities"]["n"]), fmt_ms(load["priorities"]["median_ms"]),
             fmt_ms(load["priorities"]["p99_ms"]), fmt_ms(load["priorities"]["max_ms"]))]
    if idle is not None:
        rows.append(("sample 64x16, no collectors", str(idle["sample"]["n"]), fmt_ms(idle["sample"]["median_ms"]),
                     fmt_ms(idle["sample"]["p99_ms"]), fmt_ms(idle["sample"]["max_ms"])))
    rows.append(("POST /v1/chunks (write+report)", str(r["chunk_post"]["n"]), fmt_ms(r["chunk_post"]["median_ms"]),
                 fmt_ms(r["chunk_post"]["p99_ms"]), fmt_ms(r["chunk_post"]["max_ms"])))
    print_table(f"Coordinator (uvicorn, prioritized, capacity {r['capacity']:,}): {r['collectors']} collector "
                f"processes + 1 learner client for {r['window_seconds']:.1f} s", rows)
    print(f"  ingest: {r['chunks_acked']} chunks = {r['chunks_per_second']:.1f} chunks/s = "
          f"{r['transitions_per_second']:,.0f} transitions/s (coordinator's env_steps: "
          f"{r['status_env_steps_per_second']:,.0f}/s); per collector {r['per_collector_chunks']}")
    print(f"  learner: {load['sampled_items']:,} items sampled under load, {load['not_enough_data']} x 409, "
          f"{load['errors']} errors; collectors: {r['collector_errors']} errors, {r['duplicates']} duplicates, "
          f"{r['collector_pause_directives']} pause directives")
    for what, err in (("learner", load["first_error"]), ("collector", r["collector_first_error"])):
        if err:
            print(f"  first {what} error: {err}")


# ----- main -------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000, help="in-process buffer capacity (transitions)")
    parser.add_argument("--repeats", type=int, default=500, help="timed sample / priority-update calls")
    parser.add_argument("--load-seconds", type=float, default=20.0, help="coordinator load phase")
    parser.add_argument("--idle-seconds", type=float, default=3.0, help="then sample with no collectors (0: skip)")
    parser.add_argument("--collectors", type=int, default=4, help="collector processes in the load phase")
    parser.add_argument("--capacity", type=int, default=100_000, help="the coordinator run's buffer capacity")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile sample(256) even if it meets its target")
    parser.add_argument("--skip-coordinator", action="store_true", help="only the in-process part")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/replay.json")
    parser.add_argument("--collector-worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--store-root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sync-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collector_worker is not None:
        collector_worker(args.url, args.store_root, args.collector_worker, args.sync_dir)
        return
    if args.entries < CHUNK_ROWS or args.capacity < CHUNK_ROWS:
        parser.error(f"--entries and --capacity must hold at least one chunk ({CHUNK_ROWS} transitions)")
    if args.repeats < 1 or args.collectors < 1 or args.load_seconds <= 0:
        parser.error("--repeats, --collectors and --load-seconds must be positive")

    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs", flush=True)
    buffer = bench_buffer(args.entries, args.repeats, args.seed, args.profile)
    report_buffer(buffer)
    coordinator = None
    if not args.skip_coordinator:
        gc.collect()  # the 1M-entry buffer is gone by now; keep its memory out of the load phase
        coordinator = bench_coordinator(args.load_seconds, args.idle_seconds, args.collectors, args.capacity,
                                        args.seed)
        report_coordinator(coordinator)

    targets = buffer["targets"]
    print("\nTargets")
    for name, t in targets.items():
        unit = "ms" if name.endswith("_ms") else "B/entry"
        print(f"  {name:24} {t['measured']:9.3f} {unit:7}  target < {t['target']:<4g} {verdict(t['pass'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                 if k not in ("collector_worker", "url", "store_root", "sync_dir")},
        "in_process": buffer, "coordinator": coordinator, "targets": targets,
    }, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
