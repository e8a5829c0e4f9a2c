"""An in-process stand-in for the coordinator behind httpx.MockTransport, for worker tests without a server.

It answers the routes workers call with valid wire replies, records every attempt (failed ones included), can
fail the first attempt of chosen routes with a 503 (to check what a retry sends), refuses a heartbeat `wait`
above `max_wait_seconds` with a 422 as the real route does, and lets a test replace any route's handler.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel

from rlfleet.shared.wire import (
    Ack,
    ChunkAck,
    ChunkReport,
    ClaimResponse,
    CorruptAck,
    Directive,
    EvaluationResult,
    HeartbeatResponse,
    PriorityAck,
    PriorityUpdate,
    RegisterResponse,
    Task,
    WorkerKind,
)
from rlfleet.shared.worker.client import CoordinatorClient
from rlfleet.shared.worker.session import WorkerSession

Handler = Callable[[httpx.Request], httpx.Response]
ROUTES = [  # (name, method, path pattern)
    ("register", "POST", r"/v1/workers"),
    ("heartbeat", "POST", r"/v1/workers/[^/]+/heartbeat"),
    ("claim", "POST", r"/v1/workers/[^/]+/claim"),
    ("chunks", "POST", r"/v1/chunks"),
    ("sample", "POST", r"/v1/buffers/[^/]+/sample"),
    ("priorities", "POST", r"/v1/buffers/[^/]+/priorities"),
    ("corrupt", "POST", r"/v1/buffers/[^/]+/corrupt"),
    ("learn-info", "POST", r"/v1/learn-info"),
    ("policies", "POST", r"/v1/policies"),
    ("evaluations", "POST", r"/v1/evaluations"),
    ("opponents", "GET", r"/v1/policies/opponents"),
    ("member-claim", "POST", r"/v1/generations/claim"),
    ("member-results", "POST", r"/v1/generations/\d+/results"),
]


def reply(model: BaseModel, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=json.loads(model.model_dump_json()))


def error(status: int, code: str, message: str = "refused") -> httpx.Response:
    return httpx.Response(status, json={"error": code, "message": message})


@dataclass
class Seen:
    name: str
    request: httpx.Request
    status: int

    @property
    def body(self) -> dict:
        return json.loads(self.request.content)


class FakeCoordinator:
    def __init__(self, task: Task | None = None, *, lease_seconds: float = 8.0, max_wait_seconds: float = 5.0,
                 fail_once: set[str] | None = None) -> None:
        self.task = task
        self.lease_seconds = lease_seconds
        self.max_wait_seconds = max_wait_seconds
        self.fail_once = set(fail_once or ())
        self.run_state = "running"
        self.env_steps_total = 0  # acknowledged env steps, as every directive carries them
        self.progress: dict[str, Any] = {}  # what learners hear of the run: recent_return_mean, latest_validation, ...
        self.seen: list[Seen] = []
        self.handlers: dict[str, Handler] = {}
        self.lock = threading.Lock()

    def directive(self) -> Directive:
        return Directive(run_state=self.run_state, env_steps_total=self.env_steps_total,  # type: ignore[arg-type]
                         **self.progress)

    def of(self, name: str) -> list[Seen]:
        """Every attempt at route `name`, in order."""
        with self.lock:
            return [s for s in self.seen if s.name == name]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        name = next((n for n, method, pattern in ROUTES
                     if request.method == method and re.fullmatch(pattern, request.url.path)), "unknown")
        with self.lock:
            fail = name in self.fail_once
            self.fail_once.discard(name)
        if fail:
            response = httpx.Response(503, text="try again")
        elif name in self.handlers:
            response = self.handlers[name](request)
        else:
            response = self._default(name, request)
        with self.lock:
            self.seen.append(Seen(name, request, response.status_code))
        return response

    def _default(self, name: str, request: httpx.Request) -> httpx.Response:
        if name == "register":
            return reply(RegisterResponse(worker_id="worker-1", lease_seconds=self.lease_seconds,
                                          heartbeat_seconds=self.lease_seconds / 4,
                                          max_wait_seconds=self.max_wait_seconds, run_name="test-run",
                                          directive=self.directive()))
        if name == "heartbeat":
            wait = float(request.url.params.get("wait", 0))
            if wait > self.max_wait_seconds:  # what the real route's Query(le=...) does
                return error(422, "invalid", f"wait {wait} above {self.max_wait_seconds}")
            return reply(HeartbeatResponse(lease_seconds=self.lease_seconds, directive=self.directive()))
        if name == "claim":
            task = self.task if self.run_state == "running" else None
            return reply(ClaimResponse(task=task, directive=self.directive()))
        if name == "chunks":
            report = ChunkReport.model_validate_json(request.content)
            return reply(ChunkAck(chunk_id=report.chunk_id, duplicate=False, directive=self.directive()))
        if name == "priorities":
            update = PriorityUpdate.model_validate_json(request.content)
            return reply(PriorityAck(updated=len(update.ids), ignored=0, directive=self.directive()))
        if name == "corrupt":
            return reply(CorruptAck(removed=True, directive=self.directive()))
        if name in ("learn-info", "policies"):
            return reply(Ack(directive=self.directive()))
        if name == "evaluations":
            body = json.loads(request.content)
            mean = sum(body["returns"]) / len(body["returns"])
            return reply(EvaluationResult(policy_version=body["policy_version"], mean=mean, std=0.0,
                                          episodes=len(body["returns"]), env_steps=0, wall_seconds=1.0,
                                          solved=False))
        return error(404, "not_found", f"no route {request.method} {request.url.path}")


def make_session(fake: FakeCoordinator, kind: WorkerKind, *, patience: float = 30.0,
                 timeout: float = 10.0) -> WorkerSession:
    """A session talking to `fake` (not registered yet: call register() or hand it to run_session)."""
    client = CoordinatorClient("http://coordinator.invalid", "token", timeout=timeout,
                               max_unavailable_seconds=patience, transport=httpx.MockTransport(fake))
    return WorkerSession(client, kind, "test-host")
