"""The live dashboard's page and assets, answered in front of FastAPI's router (GET / and /dashboard/*).

The files ship inside the package (pyproject package-data) and are read once at start: no CDN, nothing
fetched from outside, so the page works on a machine without internet. The page itself holds no data and
needs no token; what it shows comes from `GET /v1/dashboard` (read scope), with the token the user gives it
(kept in sessionStorage, sent as a bearer header, never put in a URL's query string).
"""

from __future__ import annotations

from importlib import resources

from starlette.types import ASGIApp, Receive, Scope, Send

from rlfleet.coordinator.telemetry import ROUTE_KEY

_TYPES = {".html": b"text/html; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
          ".css": b"text/css; charset=utf-8"}
# Only this origin's own script, style and API; the page may not be framed, and sends no referrer.
_HEADERS = [(b"cache-control", b"no-cache"), (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; "
                                         b"connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'")]


def _load() -> dict[str, tuple[bytes, bytes]]:
    files = {}
    for entry in resources.files(__name__).iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if suffix in _TYPES:
            files[entry.name] = (_TYPES[suffix], entry.read_bytes())
    return files


class DashboardPages:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.files = _load()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path = scope["path"]
            name = "index.html" if path == "/" else path[len("/dashboard/"):] if path.startswith("/dashboard/") else ""
            if name in self.files:
                scope[ROUTE_KEY] = "/" if path == "/" else "/dashboard/{asset}"
                content_type, body = self.files[name]
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                                        *_HEADERS]})
                await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
                return
        await self.app(scope, receive, send)
