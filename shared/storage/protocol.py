"""The payload store's protocol: objects addressed by validated relative paths, and the errors every store raises.

`PayloadStore` is the interface every service uses (shared/storage/factory.py builds one from the settings);
`LocalStore` (shared/storage/local.py) keeps files under a directory, `S3Store` (shared/storage/s3.py) objects
under a bucket prefix. Both validate paths with `check_path`, so no path can reach outside a store's root.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

from rlfleet.shared.ids import PAYLOAD_PATH_PATTERN

_PATH_RE = re.compile(PAYLOAD_PATH_PATTERN)


class StorePathError(ValueError):
    """A payload path is malformed or would leave the store root."""


class IntegrityError(ValueError):
    """A payload's bytes do not match the sha256 it was reported with."""


class StoreUnavailable(RuntimeError):
    """The store could not be reached or refused us (endpoint, credentials, bucket) for longer than its retries:
    the message names the setting to check. Not an OSError on purpose: readers treat an OSError as a bad
    payload and report it corrupt, and an unreachable store is no payload's fault."""


def valid_path(relpath: str) -> bool:
    """Whether `relpath` is relative segments of [A-Za-z0-9_.-] (no '..', no leading '/' or '.')."""
    return isinstance(relpath, str) and _PATH_RE.fullmatch(relpath) is not None


def check_path(relpath: str) -> str:
    """`relpath` if it is a valid payload path (`valid_path`), else raise StorePathError."""
    if not valid_path(relpath):
        raise StorePathError(f"payload path {relpath!r} must be relative segments of [A-Za-z0-9_.-]")
    return relpath


class PayloadStore(Protocol):
    """What every service needs from a store. Paths are relative (`check_path`); a missing object reads as
    FileNotFoundError (get) or None (size); a store that stays unreachable raises StoreUnavailable."""

    local: bool  # True: calls are microsecond syscalls an event loop may make inline; False: use a thread

    def describe(self) -> str:
        """Where the store is, for logs (never credentials)."""
        ...

    def check(self) -> None:
        """Reach the store once (at service start); raises StoreUnavailable naming the setting to fix."""
        ...

    def put(self, relpath: str, data: bytes) -> str:
        """Write `data` so that readers see all of it or nothing; returns its sha256."""
        ...

    def get(self, relpath: str, sha256: str | None = None, max_bytes: int = 1 << 30) -> bytes:
        """The object's bytes, checked against `sha256` when given (IntegrityError if they differ)."""
        ...

    def size(self, relpath: str) -> int | None:
        ...

    def list_prefix(self, prefix: str) -> list[str]:
        """Relative paths of the objects under the directory `prefix`, sorted."""
        ...

    def delete(self, relpath: str) -> bool:
        ...

    def delete_many(self, relpaths: list[str]) -> int:
        ...

    def delete_unreferenced(self, prefix: str, keep: set[str], older_than: float) -> int:
        """Delete objects under `prefix` not in `keep` and last modified before `older_than` (Unix time)."""
        ...


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
