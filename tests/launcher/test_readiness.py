"""Light workers' wait for the coordinator: ready as soon as /readyz answers 200, bounded otherwise."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from rlfleet.launcher.readiness import await_coordinator
from rlfleet.launcher.up import free_port


class _Readyz(http.server.BaseHTTPRequestHandler):
    ready_after = 0.0  # monotonic time from which /readyz answers 200

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        ok = self.path == "/readyz" and time.monotonic() >= self.ready_after
        self.send_response(200 if ok else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Readyz]]]:
    handler = type("Handler", (_Readyz,), {})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_without_a_coordinator_url_the_worker_starts_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLFLEET_COORDINATOR_URL", raising=False)
    started = time.monotonic()
    assert await_coordinator(limit=5.0)
    assert time.monotonic() - started < 0.1


def test_waits_through_not_ready_answers_until_ready(server: tuple[str, type[_Readyz]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = server
    handler.ready_after = time.monotonic() + 0.5
    monkeypatch.setenv("RLFLEET_COORDINATOR_URL", url + "/")
    started = time.monotonic()
    assert await_coordinator(limit=10.0)
    assert 0.45 <= time.monotonic() - started < 5.0


def test_an_absent_coordinator_ends_the_wait_at_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLFLEET_COORDINATOR_URL", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    assert not await_coordinator(limit=0.3)
    assert 0.3 <= time.monotonic() - started < 3.0
