"""shared.worker.client.CoordinatorClient over httpx.MockTransport: what is retried, what is final, what is sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from pydantic import BaseModel

from rlfleet.shared.worker import client as client_module
from rlfleet.shared.worker.client import CoordinatorClient, CoordinatorRejected, CoordinatorUnavailable, Stopped

Handler = Callable[[httpx.Request], httpx.Response]


class Pong(BaseModel):
    value: int


class Ping(BaseModel):
    n: int
    tag: str


OK = httpx.Response(200, json={"value": 42})


@pytest.fixture(autouse=True)
def _no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Minimal backoff (0.5 x nominal) keeps the retry tests fast and their timing deterministic."""
    monkeypatch.setattr("rlfleet.shared.worker.client.random.random", lambda: 0.0)


class Recorder:
    """A MockTransport handler that replays a script of responses/exceptions and records every request."""

    def __init__(
        self, script: list[httpx.Response | Exception], then: httpx.Response | Exception | None = None
    ) -> None:
        self.script = list(script)
        self.then = then
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.script.pop(0) if self.script else self.then
        if item is None:
            raise AssertionError("unexpected extra request")
        if isinstance(item, Exception):
            raise item
        return httpx.Response(item.status_code, headers=item.headers, content=item.content)


@pytest.fixture
def make_client() -> Iterator[Callable[..., CoordinatorClient]]:
    clients: list[CoordinatorClient] = []

    def make(handler: Handler, **kwargs: object) -> CoordinatorClient:
        kwargs.setdefault("max_unavailable_seconds", 5.0)
        client = CoordinatorClient("http://coordinator:8000/", "secret-token",
                                   transport=httpx.MockTransport(handler), **kwargs)  # type: ignore[arg-type]
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.close()


# ----- success and what is sent -----------------------------------------------------------------------------


def test_success_first_try_parses_model_and_sends_bearer(
    make_client: Callable[..., CoordinatorClient],
) -> None:
    rec = Recorder([OK])
    result = make_client(rec).call("GET", "/v1/status", Pong)
    assert result == Pong(value=42)
    assert len(rec.requests) == 1
    req = rec.requests[0]
    assert req.headers["authorization"] == "Bearer secret-token"
    assert req.method == "GET"
    assert str(req.url) == "http://coordinator:8000/v1/status"
    assert req.content == b""
    assert "content-type" not in req.headers


def test_body_is_sent_as_json(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([OK])
    make_client(rec).call("POST", "/v1/things", Pong, Ping(n=3, tag="x"))
    req = rec.requests[0]
    assert req.method == "POST"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["authorization"] == "Bearer secret-token"
    assert json.loads(req.content) == {"n": 3, "tag": "x"}


# ----- transient failures are retried -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("peer closed connection"),
        httpx.Response(500, json={"error": "internal", "message": "boom"}),
        httpx.Response(502, text="bad gateway"),
        httpx.Response(503),
        httpx.Response(429, json={"error": "slow_down", "message": "too many"}),
        httpx.Response(200, text="this is not json"),
        httpx.Response(200, json={"unexpected": "shape"}),
        httpx.Response(200, json={"value": "not-an-int"}),
        httpx.Response(200, content=b""),
    ],
    ids=["connect", "read-timeout", "protocol", "500", "502", "503", "429", "invalid-json", "wrong-shape",
         "wrong-type", "empty-200"],
)
def test_transient_failures_retried_then_succeed(
    make_client: Callable[..., CoordinatorClient], failure: httpx.Response | Exception
) -> None:
    rec = Recorder([failure, failure, OK])
    started = time.monotonic()
    result = make_client(rec).call("POST", "/v1/chunks", Pong, Ping(n=1, tag="t"))
    assert result.value == 42
    assert len(rec.requests) == 3
    # the retried request is the same request: same body, same auth
    assert {r.content for r in rec.requests} == {rec.requests[0].content}
    assert all(r.headers["authorization"] == "Bearer secret-token" for r in rec.requests)
    # backoff happened (0.05 + 0.1 s with jitter pinned low), but not a long one
    assert 0.1 <= time.monotonic() - started < 1.5


def test_mixed_failures_then_success(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([httpx.ConnectError("refused"), httpx.Response(503), httpx.Response(200, text="{"),
                    httpx.Response(429), OK])
    assert make_client(rec).call("GET", "/v1/x", Pong).value == 42
    assert len(rec.requests) == 5


# ----- giving up --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "problem"),
    [
        (httpx.ConnectError("connection refused"), "ConnectError"),
        (httpx.Response(500), "HTTP 500"),
        (httpx.Response(429), "HTTP 429"),
        (httpx.Response(200, text="garbage"), "unexpected reply"),
    ],
    ids=["connect", "500", "429", "garbage"],
)
def test_gives_up_after_max_unavailable_seconds(
    make_client: Callable[..., CoordinatorClient], failure: httpx.Response | Exception, problem: str
) -> None:
    rec = Recorder([], then=failure)
    client = make_client(rec, max_unavailable_seconds=0.3)
    started = time.monotonic()
    with pytest.raises(CoordinatorUnavailable) as info:
        client.call("GET", "/v1/status", Pong)
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 1.5
    assert len(rec.requests) >= 3  # it kept trying until the deadline
    message = str(info.value)
    assert "GET /v1/status" in message
    assert problem in message
    assert f"({len(rec.requests)} attempts)" in message


def test_unavailable_is_not_a_rejection() -> None:
    assert not issubclass(CoordinatorUnavailable, CoordinatorRejected)
    assert not issubclass(Stopped, CoordinatorUnavailable)


# ----- 4xx is final -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 422])
def test_4xx_raises_rejected_with_parsed_body_and_no_retry(
    make_client: Callable[..., CoordinatorClient], status: int
) -> None:
    body = {"error": "conflict_x", "message": "policy version 3 is old"}
    rec = Recorder([httpx.Response(status, json=body)])
    with pytest.raises(CoordinatorRejected) as info:
        make_client(rec).call("POST", "/v1/policies", Pong, Ping(n=1, tag="a"))
    exc = info.value
    assert (exc.status, exc.error, exc.message) == (status, "conflict_x", "policy version 3 is old")
    assert str(exc) == f"HTTP {status} conflict_x: policy version 3 is old"
    assert len(rec.requests) == 1


def test_4xx_with_non_json_body_keeps_the_text(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([httpx.Response(404, text="no such route")])
    with pytest.raises(CoordinatorRejected) as info:
        make_client(rec).call("GET", "/nope", Pong)
    assert (info.value.status, info.value.error, info.value.message) == (404, "http_error", "no such route")


@pytest.mark.parametrize("body", [[1, 2], "just a string", 7])
def test_4xx_with_non_object_json_body(make_client: Callable[..., CoordinatorClient], body: object) -> None:
    rec = Recorder([httpx.Response(400, json=body)])
    with pytest.raises(CoordinatorRejected) as info:
        make_client(rec).call("GET", "/x", Pong)
    assert info.value.error == "http_error"
    assert info.value.message == httpx.Response(400, json=body).text  # the raw text, unparsed


def test_4xx_json_missing_fields_falls_back(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([httpx.Response(422, json={"detail": "x"})])
    with pytest.raises(CoordinatorRejected) as info:
        make_client(rec).call("GET", "/x", Pong)
    assert info.value.error == "http_error"
    assert info.value.status == 422


def test_4xx_message_truncated_when_not_json(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([httpx.Response(400, text="y" * 2000)])
    with pytest.raises(CoordinatorRejected) as info:
        make_client(rec).call("GET", "/x", Pong)
    assert info.value.message == "y" * 500


def test_4xx_after_transient_failures_stops_retrying(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([httpx.Response(503), httpx.Response(409, json={"error": "conflict", "message": "dup"})])
    with pytest.raises(CoordinatorRejected, match="dup"):
        make_client(rec).call("GET", "/x", Pong)
    assert len(rec.requests) == 2


# ----- stop event -------------------------------------------------------------------------------------------


def test_stop_event_already_set_stops_after_first_failure(
    make_client: Callable[..., CoordinatorClient],
) -> None:
    stop = threading.Event()
    stop.set()
    rec = Recorder([], then=httpx.Response(503))
    started = time.monotonic()
    with pytest.raises(Stopped, match="HTTP 503"):
        make_client(rec, stop_event=stop, max_unavailable_seconds=60).call("GET", "/v1/x", Pong)
    assert len(rec.requests) == 1
    assert time.monotonic() - started < 0.5


def test_stop_event_does_not_block_a_successful_call(make_client: Callable[..., CoordinatorClient]) -> None:
    stop = threading.Event()
    stop.set()
    assert make_client(Recorder([OK]), stop_event=stop).call("GET", "/x", Pong).value == 42


def test_stop_event_set_while_retrying_interrupts_backoff(
    make_client: Callable[..., CoordinatorClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rlfleet.shared.worker.client.random.random", lambda: 1.0)  # long-ish waits: 0.15, 0.3, 0.6 ...
    stop = threading.Event()
    rec = Recorder([], then=httpx.ConnectError("refused"))
    client = make_client(rec, stop_event=stop, max_unavailable_seconds=60)
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(Stopped):
            client.call("GET", "/x", Pong)
    finally:
        timer.cancel()
    assert 0.15 <= time.monotonic() - started < 1.0
    assert client.stop_event is stop


def test_undecodable_reply_body_is_retried(make_client: Callable[..., CoordinatorClient]) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:  # built here so that httpx decodes the body inside the client, not in the test
            return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"definitely not gzip")
        return httpx.Response(200, json={"value": 42})

    assert make_client(handler).call("GET", "/v1/x", Pong).value == 42
    assert len(seen) == 2


# ----- poll: one conditional GET, no retries ------------------------------------------------------------------


def test_poll_returns_resource_and_etag_then_none_on_304(make_client: Callable[..., CoordinatorClient]) -> None:
    rec = Recorder([httpx.Response(200, json={"value": 7}, headers={"ETag": '"v7"'}), httpx.Response(304)])
    client = make_client(rec)
    assert client.poll("/x", Pong, "") == (Pong(value=7), '"v7"')
    assert "if-none-match" not in rec.requests[0].headers
    assert client.poll("/x", Pong, '"v7"') == (None, '"v7"')
    assert rec.requests[1].headers["if-none-match"] == '"v7"'


@pytest.mark.parametrize("failure", [httpx.ConnectError("refused"), httpx.Response(503),
                                     httpx.Response(200, content=b"not json")])
def test_poll_failure_reads_as_no_change_without_retrying(
    make_client: Callable[..., CoordinatorClient], failure: httpx.Response | Exception
) -> None:
    rec = Recorder([failure])
    assert make_client(rec).poll("/x", Pong, '"v1"') == (None, '"v1"')
    assert len(rec.requests) == 1


class DelayLog(threading.Event):
    """A stop event that records each backoff instead of sleeping through it."""

    def __init__(self) -> None:
        super().__init__()
        self.delays: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.delays.append(float(timeout or 0.0))
        return False


@pytest.mark.parametrize(("failure", "quick"), [(httpx.ConnectError("refused"), True),
                                                (httpx.ReadTimeout("slow"), False), (httpx.Response(503), False)])
def test_a_refused_connection_is_retried_quickly_only_while_the_coordinator_may_be_starting(
    make_client: Callable[..., CoordinatorClient], monkeypatch: pytest.MonkeyPatch,
    failure: httpx.Response | Exception, quick: bool,
) -> None:
    """Workers start beside the coordinator: while nothing listens, each retry is cheap, so they come back within
    REFUSED_RETRY_MAX (plus jitter) for about its start-up; a server that answers badly, or a longer outage,
    gets the exponential backoff that spreads a fleet out."""
    monkeypatch.setattr("rlfleet.shared.worker.client.random.random", lambda: 1.0)  # the longest jitter: x 1.5
    stop = DelayLog()
    tries = client_module.REFUSED_QUICK_TRIES + 5
    client = make_client(Recorder([failure] * tries, then=OK), stop_event=stop, max_unavailable_seconds=3600)
    assert client.call("GET", "/x", Pong).value == 42
    assert len(stop.delays) == tries
    first = stop.delays[:client_module.REFUSED_QUICK_TRIES]
    if quick:
        assert max(first) <= client_module.REFUSED_RETRY_MAX * 1.5
    else:
        assert max(first) == 5.0 * 1.5
    assert stop.delays[-1] == 5.0 * 1.5  # past the start-up window, every failure backs off fully
