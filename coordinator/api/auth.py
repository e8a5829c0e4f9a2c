"""Bearer-token scopes for the REST API.

Each scope has its own random token; `admin` may do everything and any valid token may read. Tokens are
compared in constant time. A missing or unknown token is a 401, a valid token of the wrong scope a 403, and
both messages name the setting to fix.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rlfleet.shared.tokens import Scope

MISSING_TOKEN = "missing bearer token: set RLFLEET_TOKEN or RLFLEET_TOKENS_FILE"
UNKNOWN_TOKEN = ("unknown bearer token: check RLFLEET_TOKEN / RLFLEET_TOKENS_FILE match the coordinator's "
                 "tokens file")

DUPLICATE_AUTHORIZATION = ("Authorization was sent more than once: send exactly one 'Authorization: Bearer <token>' "
                           "header (a proxy that adds its own must replace the client's, not add a second)")


class DuplicateAuthorization(ValueError):
    """A request carried more than one Authorization header."""


def authorization(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The request's Authorization header ("" when absent), from raw ASGI headers. Sent twice, it is refused
    (DuplicateAuthorization): which one the client meant cannot be known, and the gate in front and the route
    behind must not read different ones (a dict of the headers keeps the last, Starlette's `get` the first)."""
    found = [value for name, value in headers if name == b"authorization"]
    if len(found) > 1:
        raise DuplicateAuthorization(DUPLICATE_AUTHORIZATION)
    return found[0].decode("latin-1") if found else ""


bearer = HTTPBearer(auto_error=False, description="per-scope token from the tokens file (`rlfleet secrets`)")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def token_scope(tokens: dict[str, str], presented: str) -> str | None:
    found = None
    for scope, token in tokens.items():
        if hmac.compare_digest(token.encode(), presented.encode()):
            found = scope
    return found


def require(*scopes: Scope, reads: bool = False) -> Callable[..., Awaitable[str]]:
    """Dependency: the caller's scope, which must be one of `scopes` (or admin; any scope when `reads`)."""

    async def check(request: Request, credentials: Credentials) -> str:  # async: no threadpool hop per request
        if reads and request.app.state.settings.open_reads:
            return "read"
        if credentials is None:
            raise HTTPException(401, MISSING_TOKEN, headers={"WWW-Authenticate": "Bearer"})
        scope = token_scope(request.app.state.tokens, credentials.credentials)
        if scope is None:
            raise HTTPException(401, UNKNOWN_TOKEN, headers={"WWW-Authenticate": "Bearer"})
        if reads or scope == "admin" or scope in scopes:
            return scope
        raise HTTPException(403, f"a {scope!r} token cannot call this endpoint; it needs one of {list(scopes)} "
                                 "(set RLFLEET_TOKEN to that scope's token)")

    return check
