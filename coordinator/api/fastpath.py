"""Heartbeats and the liveness probe, answered in front of FastAPI's middleware, routing and dependencies.

At 1,000 collectors a policy publish answers every heartbeat long poll, and every collector at once polls
again: two thousand heartbeat requests in a burst, plus the steady renewals. Through FastAPI's stack (eleven
ASGI layers, the router's regex scan, dependency resolution, query validation) each cost ~100 us of the one
core the event loop has; here a heartbeat costs a small fraction of that, and `/healthz` never builds a
request object at all.

The FastAPI routes for both operations stay: they document them in OpenAPI and serve them where the fast path
is off (`RLFLEET_FAST_PATH=false`); tests hold both to the same answers. Everything else passes through.
Both are timed into the same latency histogram as FastAPI's routes (coordinator/telemetry.py), under the
route templates FastAPI would give them.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from rlfleet.coordinator.api.auth import MISSING_TOKEN, UNKNOWN_TOKEN, DuplicateAuthorization, authorization, token_scope
from rlfleet.coordinator.api.middleware import send_error
from rlfleet.coordinator.errors import CoordinatorError, Forbidden, Invalid

_HEARTBEAT = re.compile(r"/v1/workers/([^/]+)/heartbeat")
_HEARTBEAT_ROUTE = "/v1/workers/{worker_id}/heartbeat"
_WORKER_SCOPES = ("collector", "learner", "evaluator", "admin")
_BEARER = ((b"www-authenticate", b"Bearer"),)
_HEALTHZ = b'{"status":"ok"}'
_MAX_NEWER_THAN = 2**53
# The spellings of a boolean that pydantic (so the FastAPI route) accepts in a query string.
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class FastPath:
    def __init__(self, app: Any, max_body_bytes: int) -> None:
        """`app` is the FastAPI app: its state holds the tokens and, once started, the run."""
        self.app: ASGIApp = app
        self.state = app.state
        self.telemetry = app.state.telemetry
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if path == "/healthz" and method == "GET":
                start = time.perf_counter()
                await _send_json(send, 200, _HEALTHZ)
                self.telemetry.observe_request(method, path, 200, time.perf_counter() - start)
                return
            if method == "POST" and path.endswith("/heartbeat") and (match := _HEARTBEAT.fullmatch(path)):
                start = time.perf_counter()
                status = await self._heartbeat(scope, receive, send, match.group(1))
                self.telemetry.observe_request(method, _HEARTBEAT_ROUTE, status, time.perf_counter() - start)
                return
        await self.app(scope, receive, send)

    async def _heartbeat(self, scope: Scope, receive: Receive, send: Send, worker_id: str) -> int:
        """Answer one heartbeat; the status it was answered with."""
        try:
            header = authorization(scope["headers"])
        except DuplicateAuthorization as exc:
            await send_error(send, 400, "duplicate_authorization", str(exc))
            return 400
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            await send_error(send, 401, "unauthorized", MISSING_TOKEN, _BEARER)
            return 401
        caller = token_scope(self.state.tokens, token)
        if caller is None:
            await send_error(send, 401, "unauthorized", UNKNOWN_TOKEN, _BEARER)
            return 401
        if not await self._drain(receive):
            await send_error(send, 413, "payload_too_large", f"request body exceeds {self.max_body_bytes} bytes")
            return 413
        try:
            if caller not in _WORKER_SCOPES:
                raise Forbidden(f"a {caller!r} token cannot call this endpoint; it needs one of "
                                f"{list(_WORKER_SCOPES[:3])} (set RLFLEET_TOKEN to that scope's token)")
            newer_than, wait, while_paused = _query(scope["query_string"])
            body = await self.state.run.workers.heartbeat_reply(worker_id, caller, newer_than, wait, while_paused)
        except CoordinatorError as exc:
            await send_error(send, exc.status, exc.code, exc.message)
            return exc.status
        await _send_json(send, 200, body)
        return 200

    async def _drain(self, receive: Receive) -> bool:
        """Read (and discard) the request body; False once it exceeds the limit. A heartbeat carries none."""
        seen, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return True  # the client went away; nothing will be sent
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                return False
            more = message.get("more_body", False)
        return True


def _query(raw: bytes) -> tuple[int | None, float, bool]:
    """`newer_than`, `wait` and `while_paused` read as the OpenAPI route reads them; the last of repeated keys
    wins."""
    params = dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))  # as Starlette reads them
    newer_than: int | None = None
    if "newer_than" in params:
        try:
            newer_than = int(params["newer_than"])
        except ValueError:
            raise Invalid("query.newer_than: Input should be a valid integer") from None
        if not 0 <= newer_than <= _MAX_NEWER_THAN:
            raise Invalid(f"query.newer_than: Input should be between 0 and {_MAX_NEWER_THAN}")
    wait = 0.0
    if "wait" in params:
        try:
            wait = float(params["wait"])
        except ValueError:
            raise Invalid("query.wait: Input should be a valid number") from None
        if not (math.isfinite(wait) and 0 <= wait <= 3600):
            raise Invalid("query.wait: Input should be between 0 and 3600")
    while_paused = False
    if "while_paused" in params:
        word = params["while_paused"].lower()
        if word not in _TRUE and word not in _FALSE:
            raise Invalid("query.while_paused: Input should be a valid boolean, unable to interpret input")
        while_paused = word in _TRUE
    return newer_than, wait, while_paused


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
