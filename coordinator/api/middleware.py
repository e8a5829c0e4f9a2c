"""ASGI middleware that refuses requests before their body is read: Authorization sent twice (400), no token
(401), too large (413)."""

from __future__ import annotations

import contextlib
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rlfleet.coordinator.api.auth import MISSING_TOKEN, UNKNOWN_TOKEN, DuplicateAuthorization, authorization, token_scope

PUBLIC = "/v1/schemas"  # the file contracts: formats only, public like /openapi.json


async def send_error(send: Send, status: int, code: str, message: str,
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def _public(path: str) -> bool:
    return path == PUBLIC or path.startswith(PUBLIC + "/")


class TokenGate:
    """401 for /v1 requests without a known bearer token, before the body is parsed (an anonymous caller
    learns nothing about the schema). Which scope may call which route is checked by the route itself. A /v1
    request with more than one Authorization header is a 400, whatever its route: the route reads the header
    again, and both must read the same one."""

    def __init__(self, app: ASGIApp, tokens: dict[str, str], open_reads: bool) -> None:
        self.app = app
        self.tokens = tokens
        self.open_reads = open_reads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        try:
            header = authorization(scope.get("headers", []))
        except DuplicateAuthorization as exc:
            await send_error(send, 400, "duplicate_authorization", str(exc))
            return
        if not (self.open_reads and scope["method"] in ("GET", "HEAD")) and not _public(scope["path"]):
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token:
                await send_error(send, 401, "unauthorized", MISSING_TOKEN, ((b"www-authenticate", b"Bearer"),))
                return
            if token_scope(self.tokens, token) is None:
                await send_error(send, 401, "unauthorized", UNKNOWN_TOKEN, ((b"www-authenticate", b"Bearer"),))
                return
        await self.app(scope, receive, send)


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(send)
            return
        seen = 0
        too_big = False
        started = False

        async def limited_receive() -> Message:
            nonlocal seen, too_big
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    too_big = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # The framework may turn our exception into its own 400; once too big, its reply is dropped.
            nonlocal started
            if too_big:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        with contextlib.suppress(_TooLarge):
            await self.app(scope, limited_receive, guarded_send)
        if too_big and not started:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        await send_error(send, 413, "payload_too_large", f"request body exceeds {self.max_bytes} bytes")


class _TooLarge(Exception):
    pass
