"""Coordinator load: N simulated collectors and one simulated learner against a real coordinator process.

  python bench/coordinator_load.py [--sweep 10 100 400 1000] [--seconds 20] [--warmup 5] [--chunk-interval 0.6]
                                   [--batch 1] [--publishes 3] [--paused] [--json out.json]

Every N of the sweep gets a fresh coordinator (`python -m rlfleet.launcher coordinator`: uvicorn on 127.0.0.1, a new
data dir, a run config written here, the tokens file from `rlfleet secrets --out`) and, in this one process,
on one asyncio loop with a minimal HTTP/1.1 keep-alive client (no rlfleet imports on the request path):

- N collectors. Each registers (collector token), claims its task, then keeps ONE heartbeat long poll open on
  its own connection (`POST /v1/workers/{id}/heartbeat?newer_than=V&wait=W`, W = the registration reply's
  max_wait_seconds (5 if absent), never above lease/2; V = the newest version its heartbeat has been answered
  with: chunk acks carry the directive too, but a long poll must not skip a version because an ack told the
  collector first, or the propagation below would measure a 5 s wait instead of the push), and on
  a second connection reports a chunk every --chunk-interval seconds (closed loop: it waits for the ack, as the
  real uploader does, and never bursts to catch up). A chunk is a real payload in the run's store at
  `chunks/<task_id>/<chunk_id>.msgpack`: one of 16 CartPole chunks (4 envs x 16 steps = 64 transitions,
  encoded with shared.payloads.codec like a real collector) recorded at start-up, hard-linked under the new chunk id (no
  fsync; the coordinator checks path and size, never the bytes), reported with its exact size, sha256, ends,
  episodes and fresh columns. `--batch K` sends K reports per `POST /v1/chunk-batches` every K intervals.
- One learner (learner token): registers, claims, loops `POST /v1/buffers/replay-0/sample` (64 x 16, a DQN
  learner's request) every --sample-interval; a 409 not_enough_data is counted apart, not as an error. It also
  publishes --publishes new policy versions per point, evenly spread over the window: a small real safetensors
  file written to `<store>/policies/`, then `POST /v1/policies`.
- A /healthz probe at --healthz-rate requests/s on its own connection (no token).

With --paused the operator pauses collection (`POST /v1/run/pause`, admin token) before the collectors register,
and resumes it when the window ends: the fleet spends the point paused, as a learner-bound run's collectors
spend most of theirs (the rate limiter's pause reaches them the same way). A paused collector does what
rlfleet's does (WorkerSession.wait_out_pause): on its data connection, one heartbeat long poll
`?while_paused=true&wait=H` at a time (H = the registration's heartbeat_seconds, a quarter of the lease), and
when one comes back still paused sooner than H/2 (a coordinator that does not hold such polls) it idles the
directive's pause_seconds before the next. Against such a coordinator the fleet therefore re-checks every
pause_seconds, as its collectors did. Its heartbeat long polls for new policies go on, and so do the learner's
calls (409 not_enough_data: nothing was collected) and the publishes. The row's chunk columns are empty; a line
under it gives the paused collectors' re-checks per second and the resume's propagation (resume request sent
-> every collector's paused poll answered without a pause).

A point runs a warm-up (--warmup s) after every collector is set up, then the measurement window (--seconds).
Latencies and errors are those of requests *started* inside the window (each is followed to its end: answer,
client timeout or broken connection); throughput and CPU are over the window itself. Columns:

  N                 simulated collectors (each: 2 keep-alive connections)
  offered/s         chunk reports the collectors tried to send per second (target: N / --chunk-interval)
  acked/s           chunks acknowledged per second (not duplicate, not refused)
  chunk p50/p99     latency of one report request (one chunk, or one batch with --batch K), ms
  healthz p50/p99   GET /healthz latency from the separate probe, ms
  sample p50/p99    latency of answered (200) sample calls, ms; "ok/409" counts answers and not_enough_data
  errors            any non-2xx except the learner's 409, client timeouts (--timeout; long polls get
                    wait + --timeout), connection errors, per-report refusals in a batch, and lost leases
  cpu ms/chunk      coordinator CPU time (utime+stime of its pid and any processes it forks, all threads) per
                    acknowledged chunk; it includes the fixed cost of healthz, sampling and housekeeping, which
                    dominates at small N
  coord CPU         coordinator CPU time / wall time (100% = one core)
  client CPU        this process's CPU / wall time; "!" when >= 90% of a core: the client, not the
                    coordinator, may have been the bottleneck (the JSON also has the client's event-loop lag,
                    loop_lag, and other_cpu_cores: what other processes used meanwhile; a note is printed
                    under a row when that exceeds a quarter of a core)
  propagation       publish request sent -> EVERY collector's heartbeat long poll answered with that version
                    or newer: median and max over the point's publishes, ms ("-" if one never arrived)
  result            PASS: every collector set up, zero errors (setup and warm-up included), every publish
                    propagated, acked/s >= 80% of N / --chunk-interval (the fleet kept its pace; with --paused:
                    the resume reached every collector instead), coordinator alive; else FAIL with the reasons
                    below the table

Coordinator settings: RLFLEET_LEASE_SECONDS=--lease-seconds (default 30). The design lets the heartbeat scale
with the fleet: a collector long-polls continuously, so its lease is renewed every `wait` seconds, and a dead
worker is still detected within the lease (30 s). The run config: DQN, uniform replay of --capacity
transitions, samples_per_insert 1 with a tolerance of 10^9 transitions (so the rate limiter never pauses the
collectors nor holds back the learner after min_transitions=1000), budget effectively unlimited, open_reads off.
RLFLEET_ORPHAN_GRACE_SECONDS=3600: hard-linked payloads share their template's mtime, so the orphan sweep must
not mistake a chunk whose report is still in flight for an orphan.

The coordinator is stopped after each point (SIGTERM to its pid, SIGKILL after 15 s). A point whose coordinator
collapses still ends in bounded time: setup <= --setup-timeout, then warm-up + window, then a drain of at most
wait + --timeout + 5 s; whatever is still in flight then is cancelled. Exit status 0 when every point passed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import platform
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
NUM_ENVS = 4
CHUNK_STEPS = 16
CHUNK_ROWS = NUM_ENVS * CHUNK_STEPS  # 64 CartPole transitions per chunk
TEMPLATES = 16
BUFFER_ID = "replay-0"
RUN_NAME_PREFIX = "load"
CLIENT_BOUND = 0.9  # client CPU >= 90% of one core: it may be what limits the point
MAX_ERROR_EXAMPLES = 8
KEEP_PACE = 0.8  # a passing point acknowledges at least this share of N / --chunk-interval
OTHER_LOAD_NOTE = 0.25  # cores used by other processes above which a row gets a note
IDLE_RECONNECT = 4.0  # a keep-alive connection idle this long is replaced: uvicorn closes idle ones after 5 s


# ----- a minimal HTTP/1.1 keep-alive client ------------------------------------------------------------------
class RequestTimeout(Exception):
    """No complete answer within the request's timeout (the connection is closed: its framing is unknown)."""


class ConnectionFailed(Exception):
    """Could not connect, or the connection broke / answered garbage mid-request."""


class HttpConnection:
    """One keep-alive connection: Content-Length framing (chunked understood), JSON bodies, one request at a
    time. Reconnects lazily on the next request after any failure."""

    __slots__ = ("host", "port", "_prefix", "reader", "writer", "used")

    def __init__(self, host: str, port: int, token: str | None) -> None:
        self.host, self.port = host, port
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self._prefix = f"Host: {host}:{port}\r\n{auth}".encode("latin-1")
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = 0.0

    def close(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.transport.abort()
        self.reader = self.writer = None

    async def request(self, method: str, target: str, body: bytes | None, timeout: float) -> tuple[int, bytes]:
        try:
            async with asyncio.timeout(timeout):
                if self.writer is not None and (self.reader is None or self.reader.at_eof()
                                                or time.monotonic() - self.used > IDLE_RECONNECT):
                    self.close()  # the server closed it, or is about to (uvicorn's keep-alive timeout: 5 s)
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
                assert self.reader is not None
                if body is None:
                    head = b"%s %s HTTP/1.1\r\n%sContent-Length: 0\r\n\r\n" % (
                        method.encode(), target.encode(), self._prefix)
                    self.writer.write(head)
                else:
                    head = b"%s %s HTTP/1.1\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
                        method.encode(), target.encode(), self._prefix, len(body))
                    self.writer.write(head + body)
                if self.writer.transport.get_write_buffer_size() > 1 << 16:
                    await self.writer.drain()
                status, length, chunked, close = _parse_head(await self.reader.readuntil(b"\r\n\r\n"))
                if chunked:
                    data = await self._read_chunked()
                else:
                    data = await self.reader.readexactly(length) if length else b""
        except TimeoutError:
            self.close()
            raise RequestTimeout(f"{method} {target.split('?')[0]}: no answer within {timeout:g} s") from None
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            self.close()
            raise ConnectionFailed(f"{method} {target.split('?')[0]}: {exc!r}"[:300]) from None
        except BaseException:  # cancelled mid-request: the connection's state is unknown
            self.close()
            raise
        self.used = time.monotonic()
        if close:
            self.close()
        return status, data

    async def _read_chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # no trailers expected
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


def _parse_head(head: bytes) -> tuple[int, int, bool, bool]:
    """(status, content length, chunked, connection: close) of a response head."""
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, chunked, close = 0, False, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            close = b"close" in value.lower()
    return status, length, chunked, close


def _error_code(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", "?"))
    except (ValueError, AttributeError):
        return "?"


# ----- CPU accounting -----------------------------------------------------------------------------------------
def _stat_fields(pid: int | str) -> list[bytes] | None:
    """Fields 3.. of /proc/<pid>/stat (after the command name, which may hold spaces); None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2:].split()


def process_cpu_seconds(pid: int | str) -> float | None:
    """utime + stime of a process (all its threads); None if it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14, 15 of stat(5)


def descendants(pid: int) -> list[int]:
    """pid and every live process below it (a coordinator that forks workers is measured whole)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo.extend(children.get(tree[-1], []))
    return tree


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU time of a process tree: utime + stime of each live member plus cutime + cstime (its reaped
    children's); None if the root is gone."""
    if _stat_fields(pid) is None:
        return None
    total = 0.0
    for member in descendants(pid):
        fields = _stat_fields(member)
        if fields is not None:  # else it exited meanwhile
            total += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / CLK_TCK
    return total


def host_cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process tree (VmRSS summed over its live members)."""
    total = None
    for member in descendants(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total = (total or 0.0) + int(line.split()[1]) / 1024
    return total


@dataclass
class CpuMark:
    wall: float
    coordinator: float | None
    client: float
    host: tuple[int, int]

    @staticmethod
    def take(pid: int) -> CpuMark:
        return CpuMark(time.perf_counter(), tree_cpu_seconds(pid), process_cpu_seconds("self") or 0.0,
                       host_cpu_ticks())


# ----- payloads and policies --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Template:
    data: bytes
    sha256: str
    ends: list[int]
    fresh_columns: list[int]
    episodes: list[dict[str, float | int]]


def make_templates(seed: int) -> list[Template]:
    """TEMPLATES consecutive CartPole chunks (random actions) from the collector's own rollout code, encoded as a
    collector encodes them: ends, episodes and fresh columns are exactly those of the bytes."""
    from rlfleet.collector_worker.rollout import Rollout
    from rlfleet.shared.config.plan import RunPlan
    from rlfleet.shared.config.run_config import RunConfig
    from rlfleet.shared.payloads.codec import encode_chunk

    plan = RunPlan.of(RunConfig())  # CartPole; no policy loaded: the rollout acts uniformly at random
    rollout = Rollout(plan.config.env, NUM_ENVS, plan.spaces, plan.behaviour, seed)
    templates = []
    try:
        for k in range(TEMPLATES):
            chunk = rollout.collect(CHUNK_STEPS, epsilon=1.0)
            data = encode_chunk(chunk.arrays, {"task_id": "bench-template", "chunk_id": f"template-{k}",
                                               "policy_version": 0})
            templates.append(Template(data, hashlib.sha256(data).hexdigest(), chunk.ends, chunk.fresh_columns,
                                      [{"ret": r, "length": n} for r, n, _ in chunk.episodes]))
    finally:
        rollout.close()
    assert all(len(t.episodes) <= len(t.ends) for t in templates)
    return templates


def policy_bytes(version: int) -> bytes:
    """A small real safetensors file (a 4-64-64-2 Q-network's shapes, weights depending on the version)."""
    import numpy as np
    from safetensors.numpy import save

    rng = np.random.default_rng(version)
    shapes = {"0.weight": (64, 4), "0.bias": (64,), "2.weight": (64, 64), "2.bias": (64,), "4.weight": (2, 64),
              "4.bias": (2,)}
    return save({name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()})


def write_file(path: Path, data: bytes) -> None:
    """Write then rename (a reader never sees a partial file); no fsync: this is a benchmark's scratch store."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ----- measurements -----------------------------------------------------------------------------------------
def latency(values: list[float]) -> dict[str, float | int | None]:
    """Nearest-rank p50 / p99 / max in ms of durations in seconds."""
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] * 1e3

    return {"n": len(ordered), "p50_ms": rank(0.50), "p99_ms": rank(0.99), "max_ms": ordered[-1] * 1e3}


class Recorder:
    """What a point measured. Requests started inside [t0, t1) count; before t0 their errors are warm-up errors."""

    def __init__(self) -> None:
        self.t0 = math.inf
        self.t1 = math.inf
        self.latencies: dict[str, list[float]] = {k: [] for k in ("chunk", "healthz", "sample", "publish")}
        self.errors: Counter[str] = Counter()
        self.warmup_errors: Counter[str] = Counter()
        self.setup_errors: Counter[str] = Counter()
        self.examples: list[str] = []
        self.acked_in_window = 0
        self.acked_total = 0
        self.offered_in_window = 0
        self.duplicates = 0
        self.paused = 0
        self.pause_polls = 0
        self.not_enough_data = 0
        self.loop_lag: list[float] = []

    def in_window(self, start: float) -> bool:
        return self.t0 <= start < self.t1

    def ok(self, kind: str, start: float, end: float) -> None:
        if self.t0 <= start < self.t1:
            self.latencies[kind].append(end - start)

    def error(self, kind: str, start: float | None, what: str, detail: str) -> None:
        key = f"{kind}:{what}"
        if start is None:
            self.setup_errors[key] += 1
        elif start < self.t0:
            self.warmup_errors[key] += 1
        elif start < self.t1:
            self.errors[key] += 1
        else:
            return  # started after the window (only heartbeats still following a publish): not counted
        if len(self.examples) < MAX_ERROR_EXAMPLES:
            self.examples.append(f"{key}: {detail}"[:400])

    def acked(self, count: int, end: float) -> None:
        self.acked_total += count
        if self.t0 <= end < self.t1:
            self.acked_in_window += count


@dataclass
class Broadcast:
    """A change the whole fleet must hear of (a published policy version, or the operator's resume at the end of
    a --paused point), and when each collector set up at the time heard of it."""
    sent: float
    targets: set[int]  # collectors set up when it was sent
    version: int | None = None  # a publish: the policy version; a resume: None
    acked: float | None = None
    failed: str | None = None
    arrivals: dict[int, float] = field(default_factory=dict)

    def complete(self) -> bool:
        return self.failed is None and self.targets.issubset(self.arrivals)

    def propagation(self) -> float | None:
        if not self.complete():
            return None
        return max((self.arrivals[i] for i in self.targets), default=self.sent) - self.sent


# ----- the simulated fleet ----------------------------------------------------------------------------------
@dataclass
class PointConfig:
    n: int
    host: str
    port: int
    tokens: dict[str, str]
    store_root: Path
    templates: list[Path]
    template_meta: list[Template]
    chunk_interval: float
    batch: int
    timeout: float
    lease_seconds: float
    sample_interval: float
    sample_batch_size: int
    sample_batches: int
    healthz_rate: float
    publishes: int
    warmup: float
    seconds: float
    setup_timeout: float
    register_concurrency: int
    coordinator_pid: int
    paused: bool = False


class Fleet:
    def __init__(self, cfg: PointConfig) -> None:
        self.cfg = cfg
        self.rec = Recorder()
        self.stopping = False  # the window is over: no new requests except heartbeats still awaited
        self.ready: set[int] = set()
        self.publishes: list[Broadcast] = []
        self.wait = 5.0  # the long poll's wait, from the registration reply
        self.heartbeat_seconds = 2.5  # a paused collector's long poll wait, from the registration reply
        self.resume: Broadcast | None = None
        self.tag = os.urandom(3).hex()

    def conn(self, token_scope: str | None) -> HttpConnection:
        return HttpConnection(self.cfg.host, self.cfg.port, self.cfg.tokens[token_scope] if token_scope else None)

    def propagation_pending(self) -> bool:
        return any(p.failed is None and not p.complete() for p in self.publishes)

    def resume_pending(self) -> bool:
        """A --paused point's resume is still to be sent, or has not reached every collector yet."""
        return self.cfg.paused and (self.resume is None or (self.resume.failed is None and not self.resume.complete()))

    def heard(self, idx: int, version: int, when: float) -> None:
        for p in self.publishes:
            if p.version <= version and idx not in p.arrivals:
                p.arrivals[idx] = when

    async def call(self, conn: HttpConnection, kind: str, method: str, target: str, body: Any,
                   timeout: float | None = None, start: float | None = None, setup: bool = False,
                   ok_statuses: tuple[int, ...] = (200,)) -> tuple[int, Any] | None:
        """One request; errors are recorded (as setup errors when `setup`) and give None."""
        payload = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        start = time.perf_counter() if start is None else start
        where = None if setup else start
        try:
            status, data = await conn.request(method, target, payload, timeout or self.cfg.timeout)
        except RequestTimeout as exc:
            self.rec.error(kind, where, "timeout", str(exc))
            return None
        except ConnectionFailed as exc:
            self.rec.error(kind, where, "connection", str(exc))
            return None
        if status not in ok_statuses:
            self.rec.error(kind, where, f"http_{status}_{_error_code(data)}", data[:300].decode("latin-1"))
            return None
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            self.rec.error(kind, where, "bad_json", data[:300].decode("latin-1"))
            return None


class SimCollector:
    def __init__(self, fleet: Fleet, idx: int) -> None:
        self.fleet, self.idx = fleet, idx
        self.hb = fleet.conn("collector")
        self.data = fleet.conn("collector")
        self.worker_id = ""
        self.task_id = ""
        self.task_dir: Path | None = None
        self.known_version = 0   # from any directive: what its chunks are stamped with
        self.hb_version = 0      # newest version its heartbeat was answered with: the long poll's newer_than
        self.seq = 0
        self.relock = asyncio.Lock()
        self.generation = 0
        self.pause = 0.0  # the latest directive's pause_seconds

    def close(self) -> None:
        self.hb.close()
        self.data.close()

    def _directive(self, directive: dict[str, Any] | None) -> float:
        """Take a directive's policy version and pause; return the pause."""
        if not directive:
            return 0.0
        policy = directive.get("policy")
        if policy:
            self.known_version = max(self.known_version, int(policy["version"]))
        self.pause = float(directive.get("pause_seconds") or 0.0)
        return self.pause

    async def setup(self, deadline: float, setup: bool = True) -> bool:
        """Register and claim, retrying until `deadline`; errors count as setup errors (or in-run when not)."""
        fleet = self.fleet
        request_id = f"reg-{fleet.tag}-{self.idx}-{self.generation}"  # the same id for every retry
        while time.perf_counter() < deadline and not fleet.stopping:
            body = {"kind": "collector", "name": f"bench-c{self.idx}", "request_id": request_id}
            got = await fleet.call(self.data, "register", "POST", "/v1/workers", body, setup=setup)
            if got is not None:
                reply = got[1]
                self.worker_id = reply["worker_id"]
                wait = reply.get("max_wait_seconds", 5.0)
                fleet.wait = max(0.0, min(float(wait), fleet.cfg.lease_seconds / 2))
                fleet.heartbeat_seconds = min(fleet.wait, float(reply.get("heartbeat_seconds", fleet.wait)))
                self._directive(reply.get("directive"))
                got = await fleet.call(self.data, "claim", "POST", f"/v1/workers/{self.worker_id}/claim", None,
                                       setup=setup)
                if got is not None and got[1].get("task"):
                    self.task_id = got[1]["task"]["task_id"]
                    self._directive(got[1].get("directive"))
                    self.task_dir = fleet.cfg.store_root / "chunks" / self.task_id
                    self.task_dir.mkdir(parents=True, exist_ok=True)
                    self.generation += 1
                    return True
            await asyncio.sleep(0.5)
        return False

    async def reregister(self, generation: int) -> None:
        """The coordinator forgot this worker (404): register and claim again, as a real session does."""
        async with self.relock:
            if self.generation != generation:
                return  # the other loop already did it
            await self.setup(time.perf_counter() + self.fleet.cfg.timeout * 3, setup=False)

    async def heartbeat_loop(self) -> None:
        fleet = self.fleet
        while not fleet.stopping or fleet.propagation_pending():
            generation = self.generation
            wait = fleet.wait
            target = f"/v1/workers/{self.worker_id}/heartbeat?newer_than={self.hb_version}&wait={wait:g}"
            start = time.perf_counter()
            try:
                status, data = await self.hb.request("POST", target, None, wait + fleet.cfg.timeout)
            except (RequestTimeout, ConnectionFailed) as exc:
                what = "timeout" if isinstance(exc, RequestTimeout) else "connection"
                fleet.rec.error("heartbeat", start, what, str(exc))
                await asyncio.sleep(0.2)
                continue
            now = time.perf_counter()
            if status == 200:
                try:
                    directive = json.loads(data).get("directive") or {}
                except ValueError:
                    fleet.rec.error("heartbeat", start, "bad_json", data[:300].decode("latin-1"))
                    continue
                policy = directive.get("policy")
                if policy and int(policy["version"]) > self.hb_version:
                    self.hb_version = int(policy["version"])
                    fleet.heard(self.idx, self.hb_version, now)
                self._directive(directive)
                if directive.get("run_state", "running") != "running":
                    fleet.rec.error("heartbeat", start, "run_not_running", str(directive.get("run_state")))
                    return
                # Poll again at once, but let the other collectors answered in the same burst (a publish wakes
                # them all) take their arrival time first: else each would also wait for the others' sends.
                await asyncio.sleep(0)
                continue
            fleet.rec.error("heartbeat", start, f"http_{status}_{_error_code(data)}", data[:300].decode("latin-1"))
            if status == 404 and _error_code(data) == "unknown_worker":
                await self.reregister(generation)
            else:
                await asyncio.sleep(0.2)

    def _write_chunk(self) -> dict[str, Any]:
        """Put the next chunk's payload in the store under a fresh chunk id; return its report."""
        fleet, cfg = self.fleet, self.fleet.cfg
        self.seq += 1
        k = (self.idx + self.seq) % len(cfg.templates)
        meta = cfg.template_meta[k]
        chunk_id = f"c{self.idx}-{self.seq}-{fleet.tag}"
        path = f"chunks/{self.task_id}/{chunk_id}.msgpack"
        assert self.task_dir is not None
        target = self.task_dir / f"{chunk_id}.msgpack"
        try:
            os.link(cfg.templates[k], target)
        except OSError:  # another file system, or no hard links: write the bytes
            target.write_bytes(meta.data)
        return {"chunk_id": chunk_id, "worker_id": self.worker_id, "task_id": self.task_id, "payload_path": path,
                "sha256": meta.sha256, "size_bytes": len(meta.data), "env_steps": CHUNK_ROWS, "num_envs": NUM_ENVS,
                "ends": meta.ends, "fresh_columns": meta.fresh_columns, "episodes": meta.episodes,
                "policy_version": self.known_version}

    async def wait_out_pause(self) -> bool:
        """While the directive says pause: long polls `while_paused` on the data connection, as rlfleet's
        collector waits a pause out. False once there is nothing left to wait for (the window is over and no
        resume is still on its way, or the run ended)."""
        fleet = self.fleet
        while self.pause > 0:
            if fleet.stopping and not fleet.resume_pending():
                return False
            generation = self.generation
            wait = fleet.heartbeat_seconds
            target = f"/v1/workers/{self.worker_id}/heartbeat?while_paused=true&wait={wait:g}"
            start = time.perf_counter()
            try:
                status, data = await self.data.request("POST", target, None, wait + fleet.cfg.timeout)
            except (RequestTimeout, ConnectionFailed) as exc:
                fleet.rec.error("pause", start, "timeout" if isinstance(exc, RequestTimeout) else "connection",
                                str(exc))
                await asyncio.sleep(0.2)
                continue
            now = time.perf_counter()
            if fleet.rec.in_window(start):
                fleet.rec.pause_polls += 1
            if status != 200:
                fleet.rec.error("pause", start, f"http_{status}_{_error_code(data)}", data[:300].decode("latin-1"))
                if status == 404 and _error_code(data) == "unknown_worker":
                    await self.reregister(generation)
                else:
                    await asyncio.sleep(0.2)
                continue
            try:
                directive = json.loads(data).get("directive") or {}
            except ValueError:
                fleet.rec.error("pause", start, "bad_json", data[:300].decode("latin-1"))
                continue
            if directive.get("run_state", "running") != "running":
                fleet.rec.error("pause", start, "run_not_running", str(directive.get("run_state")))
                return False
            if self._directive(directive) == 0:
                if fleet.resume is not None:
                    fleet.resume.arrivals.setdefault(self.idx, now)
                return True
            if now - start < wait / 2:  # not held: a coordinator without these polls; its re-check interval
                await asyncio.sleep(self.pause)
        return True

    async def chunk_loop(self) -> None:
        fleet, cfg = self.fleet, self.fleet.cfg
        period = cfg.chunk_interval * cfg.batch
        pacer = Pacer(period, time.perf_counter() + random.uniform(0, period))  # spread the fleet over the period
        while True:
            if self.pause > 0:
                if not await self.wait_out_pause():
                    return
                continue
            start = await pacer.tick(lambda: fleet.stopping)
            if start is None:
                return
            generation = self.generation
            reports = [self._write_chunk() for _ in range(cfg.batch)]
            if fleet.rec.in_window(start):
                fleet.rec.offered_in_window += len(reports)
            if cfg.batch == 1:
                got = await fleet.call(self.data, "chunk", "POST", "/v1/chunks", reports[0], start=start,
                                       ok_statuses=(200, 404))
            else:
                got = await fleet.call(self.data, "chunk", "POST", "/v1/chunk-batches", {"reports": reports},
                                       start=start, ok_statuses=(200, 404))
            end = time.perf_counter()
            if got is None:
                continue
            status, reply = got
            if status == 404:
                code = (reply or {}).get("error", "?")
                fleet.rec.error("chunk", start, f"http_404_{code}", str((reply or {}).get("message"))[:300])
                if code == "unknown_worker":
                    await self.reregister(generation)
                continue
            fleet.rec.ok("chunk", start, end)
            if cfg.batch == 1:
                verdicts = [reply]
            else:
                verdicts = reply.get("results", [])
                if len(verdicts) != len(reports):
                    fleet.rec.error("chunk", start, "batch_result_count",
                                    f"{len(reports)} reports, {len(verdicts)} verdicts")
            accepted = 0
            for verdict in verdicts:
                if verdict.get("error"):
                    fleet.rec.error("chunk", start, f"refused_{verdict['error']}", str(verdict.get("message")))
                elif verdict.get("duplicate"):
                    fleet.rec.duplicates += 1
                else:
                    accepted += 1
            fleet.rec.acked(accepted, end)
            if self._directive(reply.get("directive")) > 0:
                fleet.rec.paused += 1  # the next turn of the loop waits it out


class Pacer:
    """Ticks every `period` seconds from `first_at`. Closed loop: a late tick moves the schedule on instead of
    bursting to catch up, as a real worker that waits for each reply would."""

    def __init__(self, period: float, first_at: float) -> None:
        self.period, self.next_at = period, first_at

    async def tick(self, stopping: Any) -> float | None:
        """Sleep until the next tick; its start time, or None once `stopping()`."""
        delay = self.next_at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if stopping():
            return None
        start = time.perf_counter()
        self.next_at = max(self.next_at + self.period, start)
        return start


class SimLearner:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.conn = fleet.conn("learner")
        self.pub = fleet.conn("learner")
        self.worker_id = ""
        self.buffer_id = BUFFER_ID
        self.requests = 0

    def close(self) -> None:
        self.conn.close()
        self.pub.close()

    async def setup(self, deadline: float) -> bool:
        fleet = self.fleet
        while time.perf_counter() < deadline:
            body = {"kind": "learner", "name": "bench-learner", "request_id": f"reg-{fleet.tag}-learner"}
            got = await fleet.call(self.conn, "register", "POST", "/v1/workers", body, setup=True)
            if got is not None:
                self.worker_id = got[1]["worker_id"]
                got = await fleet.call(self.conn, "claim", "POST", f"/v1/workers/{self.worker_id}/claim", None,
                                       setup=True)
                task = got[1].get("task") if got is not None else None
                if task:
                    self.buffer_id = task.get("buffer_id", BUFFER_ID)
                    return True
            await asyncio.sleep(0.5)
        return False

    async def sample_loop(self) -> None:
        fleet, cfg = self.fleet, self.fleet.cfg
        target = f"/v1/buffers/{self.buffer_id}/sample"
        pacer = Pacer(cfg.sample_interval, time.perf_counter())
        while (start := await pacer.tick(lambda: fleet.stopping)) is not None:
            self.requests += 1
            body = {"worker_id": self.worker_id, "batch_size": cfg.sample_batch_size,
                    "num_batches": cfg.sample_batches, "request_id": f"s-{fleet.tag}-{self.requests}"}
            got = await fleet.call(self.conn, "sample", "POST", target, body, start=start, ok_statuses=(200, 409))
            end = time.perf_counter()
            if got is None:
                continue
            status, reply = got
            if status == 409 and (reply or {}).get("error") == "not_enough_data":
                if fleet.rec.in_window(start):
                    fleet.rec.not_enough_data += 1
            elif status == 409:
                fleet.rec.error("sample", start, f"http_409_{(reply or {}).get('error')}", str(reply)[:300])
            else:
                fleet.rec.ok("sample", start, end)

    async def publish_loop(self, t0: float, seconds: float) -> None:
        """Publish versions 1..P at t0 + seconds * (k + 1/2) / P, one after the other as a learner does (a
        publish still in flight delays the next)."""
        count = self.fleet.cfg.publishes
        for k in range(count):
            at = t0 + seconds * (k + 0.5) / count
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            if time.perf_counter() >= t0 + seconds:
                return  # the window is over: an unsent publish is simply not part of this point
            await self.publish(k + 1)

    async def publish(self, version: int) -> None:
        fleet = self.fleet
        path = f"policies/v{version:08d}.safetensors"
        data = policy_bytes(version)
        write_file(fleet.cfg.store_root / path, data)
        body = json.dumps({"worker_id": self.worker_id, "iteration": version * 100,
                           "policy": {"version": version, "path": path,
                                      "sha256": hashlib.sha256(data).hexdigest()}}).encode()
        publish = Broadcast(time.perf_counter(), set(fleet.ready), version)
        fleet.publishes.append(publish)
        got = await fleet.call(self.pub, "publish", "POST", "/v1/policies", body, start=publish.sent)
        publish.acked = time.perf_counter()
        if got is None:
            publish.failed = "publish request failed"
        else:
            fleet.rec.ok("publish", publish.sent, publish.acked)


async def healthz_probe(fleet: Fleet, rate: float) -> None:
    conn = fleet.conn(None)
    period = 1.0 / rate
    next_at = time.perf_counter()
    try:
        while not fleet.stopping:
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            start = time.perf_counter()
            next_at = max(next_at + period, start)
            got = await fleet.call(conn, "healthz", "GET", "/healthz", None, start=start)
            if got is not None:
                fleet.rec.ok("healthz", start, time.perf_counter())
    finally:
        conn.close()


async def loop_lag_monitor(fleet: Fleet) -> None:
    """How late this event loop wakes up: a saturated client inflates every latency it measures."""
    while not fleet.stopping:
        start = time.perf_counter()
        await asyncio.sleep(0.05)
        if fleet.rec.in_window(start):
            fleet.rec.loop_lag.append(time.perf_counter() - start - 0.05)


async def run_point(cfg: PointConfig) -> dict[str, Any]:
    fleet = Fleet(cfg)
    rec = fleet.rec
    learner = SimLearner(fleet)
    collectors = [SimCollector(fleet, i) for i in range(cfg.n)]
    tasks: list[asyncio.Task[Any]] = []
    setup_started = time.perf_counter()
    setup_deadline = setup_started + cfg.setup_timeout
    gate = asyncio.Semaphore(cfg.register_concurrency)

    async def bring_up(c: SimCollector) -> None:
        async with gate:
            ok = await c.setup(setup_deadline)
        if ok:
            fleet.ready.add(c.idx)
            tasks.append(asyncio.create_task(c.heartbeat_loop()))
            tasks.append(asyncio.create_task(c.chunk_loop()))

    admin = fleet.conn("admin")
    try:
        if cfg.paused and await fleet.call(admin, "pause", "POST", "/v1/run/pause", None, setup=True) is None:
            raise RuntimeError(f"could not pause collection: {rec.examples[-1:]}")
        learner_ok = await learner.setup(setup_deadline)
        if learner_ok:
            tasks.append(asyncio.create_task(learner.sample_loop()))
        tasks.append(asyncio.create_task(healthz_probe(fleet, cfg.healthz_rate)))
        tasks.append(asyncio.create_task(loop_lag_monitor(fleet)))
        bring_ups = [asyncio.create_task(bring_up(c)) for c in collectors]
        _, pending = await asyncio.wait(bring_ups, timeout=max(0.0, setup_deadline - time.perf_counter()) + 1)
        for t in pending:
            t.cancel()
        setup_seconds = time.perf_counter() - setup_started

        await asyncio.sleep(cfg.warmup)
        mark0 = CpuMark.take(cfg.coordinator_pid)
        rec.t0 = mark0.wall
        rec.t1 = rec.t0 + cfg.seconds
        publish_tasks = [asyncio.create_task(learner.publish_loop(rec.t0, cfg.seconds))] if learner_ok else []
        await asyncio.sleep(max(0.0, rec.t1 - time.perf_counter()))
        mark1 = CpuMark.take(cfg.coordinator_pid)
        fleet.stopping = True
        if cfg.paused:
            fleet.resume = Broadcast(time.perf_counter(), set(fleet.ready))
            if await fleet.call(admin, "resume", "POST", "/v1/run/resume", None, start=fleet.resume.sent) is None:
                fleet.resume.failed = "resume request failed"

        # Drain: every request started in the window ends (answer or client timeout); heartbeats go on until
        # every publish has reached every collector, at most wait + timeout + 5 s.
        drain_deadline = time.perf_counter() + fleet.wait + cfg.timeout + 5
        leftover = [t for t in tasks + publish_tasks if not t.done()]
        if leftover:
            _, still = await asyncio.wait(leftover, timeout=max(0.0, drain_deadline - time.perf_counter()))
            for t in still:
                t.cancel()
            await asyncio.gather(*still, return_exceptions=True)
        drain_seconds = time.perf_counter() - mark1.wall
    finally:
        fleet.stopping = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        learner.close()
        admin.close()
        for c in collectors:
            c.close()
        await asyncio.sleep(0)

    return summarize(cfg, fleet, mark0, mark1, setup_seconds, drain_seconds, learner_ok)


def summarize(cfg: PointConfig, fleet: Fleet, mark0: CpuMark, mark1: CpuMark, setup_seconds: float,
              drain_seconds: float, learner_ok: bool) -> dict[str, Any]:
    rec = fleet.rec
    wall = mark1.wall - mark0.wall
    coord_cpu = (mark1.coordinator - mark0.coordinator
                 if mark0.coordinator is not None and mark1.coordinator is not None else None)
    client_cpu = mark1.client - mark0.client
    busy = (mark1.host[0] - mark0.host[0]) / max(1, mark1.host[1] - mark0.host[1])
    props = [p.propagation() for p in fleet.publishes]
    done = sorted(p for p in props if p is not None)
    errors = sum(rec.errors.values())
    point: dict[str, Any] = {
        "n": cfg.n,
        "window_seconds": wall,
        "setup_seconds": setup_seconds,
        "drain_seconds": drain_seconds,
        "collectors_ready": len(fleet.ready),
        "learner_ready": learner_ok,
        "long_poll_wait_seconds": fleet.wait,
        "offered_target_chunks_per_second": cfg.n / cfg.chunk_interval,
        "offered_chunks_per_second": rec.offered_in_window / wall,
        "acked_chunks_per_second": rec.acked_in_window / wall,
        "acked_chunks_in_window": rec.acked_in_window,
        "acked_chunks_total": rec.acked_total,
        "duplicates": rec.duplicates,
        "pause_directives": rec.paused,
        "paused": cfg.paused,
        # paused collectors' `while_paused` polls (re-checks, against a coordinator that does not hold them)
        "pause_polls_per_second": rec.pause_polls / wall,
        "resume": None if fleet.resume is None else {
            "complete": fleet.resume.complete(), "reached": len(fleet.resume.arrivals.keys() & fleet.resume.targets),
            "targets": len(fleet.resume.targets), "failed": fleet.resume.failed,
            "propagation_ms": None if (t := fleet.resume.propagation()) is None else t * 1e3},
        "chunk_latency": latency(rec.latencies["chunk"]),
        "healthz_latency": latency(rec.latencies["healthz"]),
        "sample_latency": latency(rec.latencies["sample"]),
        "publish_latency": latency(rec.latencies["publish"]),
        "sample_ok": len(rec.latencies["sample"]),
        "sample_not_enough_data": rec.not_enough_data,
        "errors": errors,
        "errors_by_kind": dict(rec.errors),
        "setup_errors": dict(rec.setup_errors),
        "warmup_errors": dict(rec.warmup_errors),
        "error_examples": rec.examples,
        "coordinator_cpu_seconds": coord_cpu,
        "coordinator_cpu_util": coord_cpu / wall if coord_cpu is not None else None,
        "coordinator_cpu_ms_per_chunk": (coord_cpu * 1e3 / rec.acked_in_window
                                         if coord_cpu is not None and rec.acked_in_window else None),
        "coordinator_rss_mib": rss_mib(cfg.coordinator_pid),
        "client_cpu_util": client_cpu / wall,
        "client_bound": client_cpu / wall >= CLIENT_BOUND,
        "host_cpu_busy": busy,
        "host_cpus": os.cpu_count(),
        # Whatever else ran on the machine meanwhile (in cores): other load skews every figure of the point.
        "other_cpu_cores": max(0.0, busy * (os.cpu_count() or 1) - (coord_cpu or 0.0) / wall - client_cpu / wall),
        "loop_lag": latency(rec.loop_lag),
        "propagation": {
            "publishes": len(fleet.publishes),
            "complete": len(done),
            "median_ms": statistics.median(done) * 1e3 if done else None,
            "max_ms": done[-1] * 1e3 if done else None,
            "each": [{"version": p.version, "propagation_ms": None if t is None else t * 1e3,
                      "first_arrival_ms": (min(p.arrivals.values()) - p.sent) * 1e3 if p.arrivals else None,
                      "publish_ms": None if p.acked is None else (p.acked - p.sent) * 1e3,
                      "reached": len(p.arrivals.keys() & p.targets), "targets": len(p.targets), "failed": p.failed}
                     for p, t in zip(fleet.publishes, props, strict=True)],
        },
    }
    return point


def judge(point: dict[str, Any], expected_publishes: int, batch: int = 1) -> None:
    reasons = []
    if batch > 1 and any(k.startswith(("chunk:http_404_not_found", "chunk:http_405")) for k in point["errors_by_kind"]):
        reasons.append("this coordinator has no POST /v1/chunk-batches route: run with --batch 1")
    if point["collectors_ready"] < point["n"]:
        reasons.append(f"only {point['collectors_ready']}/{point['n']} collectors set up")
    if not point["learner_ready"]:
        reasons.append("the learner could not register/claim")
    for what in ("setup_errors", "warmup_errors"):
        if point[what]:
            reasons.append(f"{sum(point[what].values())} {what.replace('_', ' ')}")
    if point["errors"]:
        top = ", ".join(f"{k} x{v}" for k, v in Counter(point["errors_by_kind"]).most_common(4))
        reasons.append(f"{point['errors']} errors ({top})")
    prop = point["propagation"]
    if prop["publishes"] < expected_publishes:
        reasons.append(f"{expected_publishes - prop['publishes']}/{expected_publishes} publishes not sent in the "
                       f"window (the one before was still in flight)")
    if prop["complete"] < prop["publishes"]:
        reasons.append(f"{prop['publishes'] - prop['complete']}/{prop['publishes']} publishes never reached every "
                       f"collector")
    target, acked = point["offered_target_chunks_per_second"], point["acked_chunks_per_second"]
    resume = point.get("resume")
    if point.get("paused"):
        if resume is None or not resume["complete"]:
            reasons.append("the resume never reached every paused collector" if resume is None or not resume["failed"]
                           else resume["failed"])
    elif not point["acked_chunks_in_window"]:
        reasons.append("no chunk acknowledged in the window")
    elif acked < KEEP_PACE * target:
        reasons.append(f"{acked:.0f} chunks/s acknowledged of the {target:.0f}/s the fleet should send: the "
                       f"collectors could not keep their pace (they wait for each ack)")
    if not point.get("coordinator_alive", True):
        reasons.append(f"the coordinator exited (code {point.get('coordinator_exit')})")
    point["pass"] = not reasons
    point["fail_reasons"] = reasons


# ----- the coordinator process ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_nofile() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (the coordinator child inherits it); returns the new limits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def make_tokens(path: Path) -> dict[str, str]:
    """`rlfleet secrets --out FILE`, run as the operator would."""
    subprocess.run([sys.executable, "-m", "rlfleet.launcher", "secrets", "--out", str(path)], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(path.read_text())


def run_config(name: str, capacity: int, seed: int) -> dict[str, Any]:
    return {
        "name": name, "seed": seed, "algo": "dqn",
        "collector": {"num_envs": NUM_ENVS, "chunk_steps": CHUNK_STEPS},
        "replay": {"capacity_transitions": capacity, "min_transitions": 1000, "samples_per_insert": 1.0,
                   "tolerance_transitions": 10**9, "sampler": "uniform"},
        "dqn": {"batch_size": 64, "batches_per_request": 16},
        "budget": {"max_env_steps": 2**50, "max_wall_seconds": 10**8},
    }


def start_coordinator(point_dir: Path, config_file: Path, run: str, data_dir: Path, tokens_file: Path, port: int,
                      lease_seconds: float, db_synchronous: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLFLEET_")}
    env.update({
        "RLFLEET_CONFIG": str(config_file), "RLFLEET_RUN": run, "RLFLEET_DATA_DIR": str(data_dir),
        "RLFLEET_TOKENS_FILE": str(tokens_file),
        "RLFLEET_HOST": "127.0.0.1", "RLFLEET_PORT": str(port), "RLFLEET_LEASE_SECONDS": f"{lease_seconds:g}",
        "RLFLEET_OPEN_READS": "false", "RLFLEET_ORPHAN_GRACE_SECONDS": "3600", "PYTHONUNBUFFERED": "1",
        "RLFLEET_DB_SYNCHRONOUS": db_synchronous, "PYTHONPATH": str(REPO),
    })
    log_path = point_dir / "coordinator.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rlfleet.launcher", "coordinator"], cwd=REPO, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # a Ctrl-C here reaches us; we stop it ourselves
    return proc, log_path


def wait_ready(port: int, proc: subprocess.Popen[bytes], log_path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the coordinator exited with {proc.returncode} before it was ready:\n"
                               + log_path.read_text(errors="replace")[-3000:])
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            if resp.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the coordinator was not ready within {timeout:g} s:\n"
                       + log_path.read_text(errors="replace")[-3000:])


def stop_coordinator(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def bench_point(n: int, args: argparse.Namespace, tokens: dict[str, str], tokens_file: Path,
                templates: list[Template], workdir: Path) -> dict[str, Any]:
    point_dir = Path(tempfile.mkdtemp(prefix=f"n{n}-", dir=workdir))
    data_dir = point_dir / "data"
    name = f"{RUN_NAME_PREFIX}-n{n}"
    store_root = data_dir / "runs" / name / "store"
    template_dir = point_dir / "templates"  # same file system as the store, outside it: hard links work
    template_dir.mkdir(parents=True)
    template_paths = []
    for k, t in enumerate(templates):
        template_paths.append(template_dir / f"t{k:02d}.msgpack")
        template_paths[-1].write_bytes(t.data)
    config_file = point_dir / "run.yaml"
    import yaml  # a dependency of the project anyway

    config_file.write_text(yaml.safe_dump(run_config(name, args.capacity, args.seed), sort_keys=False))
    port = args.port or free_port()
    proc, log_path = start_coordinator(point_dir, config_file, name, data_dir, tokens_file, port, args.lease_seconds,
                                       args.db_synchronous)
    try:
        wait_ready(port, proc, log_path)
        store_root.mkdir(parents=True, exist_ok=True)
        cfg = PointConfig(
            n=n, host="127.0.0.1", port=port, tokens=tokens, store_root=store_root, templates=template_paths,
            template_meta=templates, chunk_interval=args.chunk_interval, batch=args.batch, timeout=args.timeout,
            lease_seconds=args.lease_seconds, sample_interval=args.sample_interval,
            sample_batch_size=args.sample_batch_size, sample_batches=args.sample_batches,
            healthz_rate=args.healthz_rate, publishes=args.publishes, warmup=args.warmup, seconds=args.seconds,
            setup_timeout=args.setup_timeout, register_concurrency=args.register_concurrency,
            coordinator_pid=proc.pid, paused=args.paused,
        )
        point = asyncio.run(run_point(cfg))
        point["coordinator_alive"] = proc.poll() is None
        point["coordinator_exit"] = proc.returncode
        judge(point, args.publishes, args.batch)
        if not point["coordinator_alive"]:
            point["coordinator_log_tail"] = log_path.read_text(errors="replace")[-3000:]
        return point
    finally:
        stop_coordinator(proc)
        if not args.keep:
            shutil.rmtree(point_dir, ignore_errors=True)


# ----- output -----------------------------------------------------------------------------------------------
COLUMNS = [("N", 5), ("offered/s", 9), ("acked/s", 8), ("chunk p50/p99 ms", 17), ("healthz p50/p99 ms", 18),
           ("sample p50/p99 ms", 17), ("ok/409", 9), ("errors", 6), ("cpu ms/chunk", 12), ("coord CPU", 9),
           ("client CPU", 10), ("propagation ms", 15), ("result", 6)]


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _pair(stats: dict[str, Any]) -> str:
    return f"{_ms(stats['p50_ms'])} / {_ms(stats['p99_ms'])}"


def header() -> str:
    return "  ".join(name.rjust(width) for name, width in COLUMNS)


def row(p: dict[str, Any]) -> str:
    prop = p["propagation"]
    util = p["coordinator_cpu_util"]
    cells = [
        str(p["n"]), f"{p['offered_chunks_per_second']:.0f}", f"{p['acked_chunks_per_second']:.0f}",
        _pair(p["chunk_latency"]), _pair(p["healthz_latency"]), _pair(p["sample_latency"]),
        f"{p['sample_ok']}/{p['sample_not_enough_data']}", str(p["errors"]),
        "-" if p["coordinator_cpu_ms_per_chunk"] is None else f"{p['coordinator_cpu_ms_per_chunk']:.2f}",
        "-" if util is None else f"{util * 100:.0f}%",
        f"{p['client_cpu_util'] * 100:.0f}%" + ("!" if p["client_bound"] else ""),
        f"{_ms(prop['median_ms'])} / {_ms(prop['max_ms'])}" if prop["complete"] == prop["publishes"] and
        prop["publishes"] else f"- ({prop['complete']}/{prop['publishes']})",
        "PASS" if p["pass"] else "FAIL",
    ]
    return "  ".join(cell.rjust(width) for cell, (_, width) in zip(cells, COLUMNS, strict=True))


def git_commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip()
    return None


# ----- main -------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", type=int, nargs="+", default=[10, 100, 400, 1000], help="collector counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="measurement window per point")
    parser.add_argument("--warmup", type=float, default=5.0, help="after set-up, before the window")
    parser.add_argument("--chunk-interval", type=float, default=0.6,
                        help="seconds between one collector's chunks (1,000 collectors at 0.6 offer ~1,700/s)")
    parser.add_argument("--batch", type=int, default=1,
                        help="chunk reports per request: 1 uses POST /v1/chunks, 2-64 POST /v1/chunk-batches")
    parser.add_argument("--publishes", type=int, default=3, help="policy versions the learner publishes per point")
    parser.add_argument("--paused", action="store_true",
                        help="collection paused by the operator for the whole point, resumed when the window ends")
    parser.add_argument("--healthz-rate", type=float, default=20.0, help="/healthz probes per second")
    parser.add_argument("--sample-interval", type=float, default=0.05, help="seconds between the learner's samples")
    parser.add_argument("--sample-batch-size", type=int, default=64)
    parser.add_argument("--sample-batches", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="client timeout of each request (a long poll gets its wait on top); counts as error")
    parser.add_argument("--lease-seconds", type=float, default=30.0, help="RLFLEET_LEASE_SECONDS of the coordinator")
    parser.add_argument("--db-synchronous", choices=("NORMAL", "FULL"), default="NORMAL",
                        help="RLFLEET_DB_SYNCHRONOUS of the coordinator: what FULL (compose, Kubernetes) costs")
    parser.add_argument("--capacity", type=int, default=1_000_000, help="replay capacity (transitions)")
    parser.add_argument("--setup-timeout", type=float, default=120.0,
                        help="longest time to register and claim all collectors of a point")
    parser.add_argument("--register-concurrency", type=int, default=32, help="registrations in flight at once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=0, help="coordinator port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep each point's data dir and coordinator log")
    parser.add_argument("--json", type=Path, default=None, help="write every point's figures here")
    args = parser.parse_args(argv)
    if not 1 <= args.batch <= 64:
        parser.error("--batch must be 1..64 (ChunkBatch takes 1 to 64 reports)")
    if min(args.sweep) < 1 or args.seconds <= 0 or args.chunk_interval <= 0 or args.healthz_rate <= 0:
        parser.error("--sweep, --seconds, --chunk-interval and --healthz-rate must be positive")
    if args.publishes < 0 or args.warmup < 0 or args.timeout <= 0:
        parser.error("--publishes and --warmup must be >= 0, --timeout > 0")
    return args


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the sweep, print a table row per point as it finishes; returns the JSON document."""
    args = parse_args(argv)
    nofile = raise_nofile()
    need = 2 * max(args.sweep) + 64
    if nofile[0] < need:
        print(f"warning: RLIMIT_NOFILE is {nofile[0]}, below the ~{need} sockets the largest point needs",
              file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="rlfleet-load-", dir=args.workdir))
    doc: dict[str, Any] = {
        "benchmark": "coordinator_load", "argv": sys.argv[1:] if argv is None else argv,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "chunk_transitions": CHUNK_ROWS, "num_envs": NUM_ENVS, "chunk_steps": CHUNK_STEPS,
        "python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
        "git_commit": git_commit(), "rlimit_nofile": list(nofile), "points": [],
    }
    try:
        tokens_file = scratch / "tokens.json"
        tokens = make_tokens(tokens_file)
        templates = make_templates(args.seed)
        mode = "POST /v1/chunks" if args.batch == 1 else f"POST /v1/chunk-batches x{args.batch}"
        print(f"coordinator load: {args.seconds:g} s window after {args.warmup:g} s warm-up; a chunk every "
              f"{args.chunk_interval:g} s per collector ({mode}, {CHUNK_ROWS} transitions, "
              f"{len(templates[0].data)} B); lease {args.lease_seconds:g} s; journal synchronous="
              f"{args.db_synchronous}; {os.cpu_count()} CPUs", flush=True)
        print(header(), flush=True)
        for n in args.sweep:
            point = bench_point(n, args, tokens, tokens_file, templates, scratch)
            doc["points"].append(point)
            print(row(point), flush=True)
            if point["paused"]:
                resume = point["resume"]
                reached = ("-" if resume is None else f"{_ms(resume['propagation_ms'])} ms" if resume["complete"]
                           else f"- ({resume['reached']}/{resume['targets']})")
                print(" " * 7 + f"paused: {point['pause_polls_per_second']:.0f} paused polls/s; the resume reached "
                      f"every collector in {reached}", flush=True)
            if point["other_cpu_cores"] > OTHER_LOAD_NOTE:
                print(" " * 7 + f"note: other processes used {point['other_cpu_cores']:.2f} of the "
                      f"{os.cpu_count()} cores during this window", flush=True)
            if point["fail_reasons"]:
                print(" " * 7 + "; ".join(point["fail_reasons"]), flush=True)
                for example in point["error_examples"][:3]:
                    print(" " * 9 + example[:200], flush=True)
        bound = [p["n"] for p in doc["points"] if p["client_bound"]]
        if bound:
            print(f"note: the client used >= {CLIENT_BOUND:.0%} of a core at N={bound}: those points may measure "
                  f"the client, not the coordinator", flush=True)
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(doc, indent=2))
    return doc


def main(argv: list[str] | None = None) -> int:
    doc = run(argv)
    return 0 if doc["points"] and all(p["pass"] for p in doc["points"]) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
