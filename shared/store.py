"""The payload store: files under one root, addressed by validated relative paths.

Writes are atomic (temp file, fsync, rename, fsync of the directory) so a reader sees a whole file or none,
and a crash never leaves a torn payload that was already acknowledged. Reads can verify a sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from pathlib import Path

from shared.ids import PAYLOAD_PATH_PATTERN

_PATH_RE = re.compile(PAYLOAD_PATH_PATTERN)


class StorePathError(ValueError):
    """A payload path is malformed or would leave the store root."""


class IntegrityError(ValueError):
    """A payload's bytes do not match the sha256 it was reported with."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename over `path`, fsync the directory: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class LocalStore:
    """A directory (a shared volume in compose) holding chunk payloads and policy files."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, relpath: str) -> Path:
        """Map a relative path to an absolute one, refusing '..', absolute paths and symlinks leaving the root."""
        if not isinstance(relpath, str) or not _PATH_RE.fullmatch(relpath):
            raise StorePathError(f"payload path {relpath!r} must be relative segments of [A-Za-z0-9_.-]")
        path = (self.root / relpath).resolve()
        if not path.is_relative_to(self.root):
            raise StorePathError(f"payload path {relpath!r} leaves the store root")
        return path

    def put(self, relpath: str, data: bytes) -> str:
        """Write atomically and durably; returns the sha256. Rewriting identical bytes is harmless."""
        atomic_write(self.resolve(relpath), data)
        return sha256_hex(data)

    def get(self, relpath: str, sha256: str | None = None, max_bytes: int = 1 << 30) -> bytes:
        path = self.resolve(relpath)
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise IntegrityError(f"{relpath}: larger than the {max_bytes}-byte limit")
        if sha256 is not None and sha256_hex(data) != sha256:
            raise IntegrityError(f"{relpath}: sha256 mismatch (file changed or corrupt)")
        return data

    def size(self, relpath: str) -> int | None:
        try:
            return self.resolve(relpath).stat().st_size
        except FileNotFoundError:
            return None

    def delete_unreferenced(self, prefix: str, keep: set[str], older_than: float) -> int:
        """Delete regular files under `prefix` (torn temp files included) whose relative path is not in `keep`
        and whose mtime is before `older_than` (a Unix time). Returns how many were deleted."""
        base = self.resolve(prefix)
        deleted = 0
        for path in list(base.rglob("*")) if base.is_dir() else ():
            try:
                if (path.is_file() and not path.is_symlink() and path.stat().st_mtime < older_than
                        and path.relative_to(self.root).as_posix() not in keep):
                    path.unlink()
                    deleted += 1
            except FileNotFoundError:
                continue  # deleted meanwhile
        return deleted

    def delete(self, relpath: str) -> bool:
        try:
            self.resolve(relpath).unlink()
            return True
        except FileNotFoundError:
            return False
