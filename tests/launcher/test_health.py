"""`rlfleet health URL`, the coordinator's compose healthcheck: exit 0 only for a 200."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.health import healthy
from rlfleet.launcher.up import free_port


class _Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/readyz" else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_healthy_only_on_200(url: str) -> None:
    assert healthy(f"{url}/readyz")
    assert not healthy(f"{url}/other")  # 503
    assert not healthy(f"http://127.0.0.1:{free_port()}/readyz")  # nothing listening


def test_the_command_exits_0_or_1(url: str) -> None:
    assert CliRunner().invoke(app, ["health", f"{url}/readyz"]).exit_code == 0
    assert CliRunner().invoke(app, ["health", f"{url}/other"]).exit_code == 1
