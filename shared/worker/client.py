"""The workers' HTTP client: bounded retries with backoff, typed replies, and errors that say what to fix.

Transient failures (connection refused, timeouts, 5xx, 429, an unparseable reply) are retried with
exponential backoff and jitter until `max_unavailable_seconds` have passed (a refused connection, which
costs the host nothing, is retried quickly for the first REFUSED_QUICK_TRIES tries: a worker started beside a
coordinator that is still importing registers as soon as it listens, while a fleet facing a longer outage
still spreads out); a 4xx is final and raised as
CoordinatorRejected carrying the coordinator's message. Because every mutating request carries a
client-generated id, retrying after a timeout can never double-count.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)
R = TypeVar("R", bound=BaseModel)
REFUSED = httpx.ConnectError.__name__  # how `_attempt` describes a failed connect
REFUSED_RETRY_MAX = 0.25  # seconds (before jitter); nothing listens yet: a retry is a SYN and a RST, not a request
REFUSED_QUICK_TRIES = 20  # about 5 s of them, a coordinator's start-up; a longer outage backs off as usual


class CoordinatorUnavailable(RuntimeError):
    """The coordinator could not be reached (or answered garbage) for longer than the configured patience."""


class CoordinatorRejected(RuntimeError):
    """The coordinator refused the request with a 4xx; retrying the same request will not help."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(f"HTTP {status} {error}: {message}")
        self.status, self.error, self.message = status, error, message


class Stopped(RuntimeError):
    """The caller's stop event was set while waiting to retry."""


class CoordinatorClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        max_unavailable_seconds: float = 120.0,
        stop_event: threading.Event | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )
        self.timeout = timeout  # of one request: a long poll must be answered well within it
        self.max_unavailable_seconds = max_unavailable_seconds
        self.stop_event = stop_event or threading.Event()

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, response_model: type[R], body: BaseModel | None = None) -> R:
        content = body.model_dump_json().encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        deadline = time.monotonic() + self.max_unavailable_seconds
        attempt = 0
        while True:
            problem = self._attempt(method, path, response_model, content, headers)
            if not isinstance(problem, str):
                return problem
            attempt += 1
            if time.monotonic() >= deadline:
                raise CoordinatorUnavailable(
                    f"{method} {path}: {problem}; gave up after {self.max_unavailable_seconds:.0f}s "
                    f"({attempt} attempts). Check RLFLEET_COORDINATOR_URL and that the coordinator is running."
                )
            quick = problem.startswith(REFUSED) and attempt <= REFUSED_QUICK_TRIES
            delay = min(REFUSED_RETRY_MAX if quick else 5.0, 0.05 * 2 ** min(attempt, 10)) * (0.5 + random.random())
            log.debug("%s %s failed (%s); retry %d in %.2fs", method, path, problem, attempt, delay)
            if self.stop_event.wait(delay):
                raise Stopped(f"{method} {path}: stopped while retrying ({problem})")

    def poll(self, path: str, response_model: type[R], etag: str) -> tuple[R | None, str]:
        """One conditional GET: (the resource, its ETag) if it changed since `etag`, else (None, etag).

        For cheap frequent polling: no retries, and any failure reads as "no change" until the next poll."""
        try:
            resp = self._http.get(path, headers={"If-None-Match": etag} if etag else None)
            if resp.status_code != 200:
                return None, etag
            return response_model.model_validate_json(resp.content), resp.headers.get("ETag", "")
        except (httpx.TransportError, httpx.DecodingError, ValidationError):
            return None, etag

    def _attempt(
        self, method: str, path: str, model: type[R], content: bytes | None, headers: dict[str, str] | None
    ) -> R | str:
        """One try: the parsed reply, or a string describing a transient failure. 4xx raises."""
        try:
            resp = self._http.request(method, path, content=content, headers=headers)
        except (httpx.TransportError, httpx.DecodingError) as exc:
            return f"{type(exc).__name__}: {exc}"
        if resp.status_code == 429 or resp.status_code >= 500:
            return f"HTTP {resp.status_code}"
        if resp.status_code >= 400:
            error, message = "http_error", resp.text[:500]
            try:
                body = resp.json()
                error, message = str(body.get("error", error)), str(body.get("message", message))
            except (ValueError, AttributeError):
                pass
            raise CoordinatorRejected(resp.status_code, error, message)
        try:
            return model.model_validate_json(resp.content)
        except ValidationError as exc:
            return f"unexpected reply: {exc.error_count()} validation errors"
