"""The payload store in a local directory (`LocalStore`), for a run whose services share a filesystem.

Writes are atomic (temp file, fsync, rename, fsync of the directory) so a reader sees a whole file or none,
and a crash never leaves a torn payload that was already acknowledged. Reads can verify a sha256.

Deletes never follow a symlink: they walk from the root one directory at a time with O_NOFOLLOW and unlink
relative to the directory's descriptor, so a link is removed as a link, and no link (planted before or
swapped in during the walk) can make the store delete anything outside its root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from rlfleet.shared.storage.protocol import IntegrityError, StorePathError, check_path, sha256_hex, valid_path


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


def _is_file(name: str, dir_fd: int) -> bool:
    """A regular file (not a link) in the directory `dir_fd`; False if it went meanwhile."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


class LocalStore:
    """A directory (a shared volume in compose) holding chunk payloads and policy files."""

    # Metadata calls (size, delete) are local syscalls answered in microseconds: an event loop may make them
    # inline rather than pay a thread hop and GIL hand-offs per request (a remote store would not be).
    local = True

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    _check = staticmethod(check_path)

    def describe(self) -> str:
        return f"directory {self.root}"

    def check(self) -> None:
        """Nothing to reach: the directory was created when the store was opened."""

    def resolve(self, relpath: str) -> Path:
        """Map a relative path to an absolute one, refusing '..', absolute paths and symlinks leaving the root."""
        path = (self.root / self._check(relpath)).resolve()
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
        """Size of the regular file at `relpath`, None if absent. Reached from the root without following links
        (a few syscalls, no realpath walk: the coordinator asks this for every chunk report)."""
        try:
            with self._parent_fd(relpath) as (parent, name):
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise StorePathError(f"payload path {relpath!r} is not a regular file inside the store root "
                                 "(a link or a directory)")
        return info.st_size

    @contextlib.contextmanager
    def _parent_fd(self, relpath: str) -> Iterator[tuple[int, str]]:
        """(a descriptor of relpath's directory, its last segment), reached from the root without following any
        symlink. FileNotFoundError if a directory is missing; StorePathError if one is a link or not a directory."""
        *dirs, name = self._check(relpath).split("/")
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in dirs:
                try:
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    raise StorePathError(f"payload path {relpath!r} leaves the store root or passes through a "
                                         f"symlink at {part!r}; the store never follows links") from exc
                os.close(fd)
                fd = child
            yield fd, name
        finally:
            os.close(fd)

    def list_prefix(self, prefix: str) -> list[str]:
        """Regular files under `prefix` ("" for the whole store; temp files of unfinished writes and symlinks
        left out), sorted."""
        found = []
        if not prefix:
            for dirpath, _, files, dir_fd in os.fwalk(self.root, follow_symlinks=False):
                rel = Path(dirpath).relative_to(self.root).as_posix()
                found += [name if rel == "." else f"{rel}/{name}" for name in files if _is_file(name, dir_fd)]
            return sorted(p for p in found if valid_path(p))
        return sorted(relpath for relpath, file, dir_fd in self._walk(prefix)
                      if valid_path(relpath) and _is_file(file, dir_fd))

    def _walk(self, prefix: str) -> Iterator[tuple[str, str, int]]:
        """(relative path, name, its directory's descriptor) of every file under a non-empty `prefix`; nothing
        if it does not exist. fwalk with follow_symlinks=False opens each directory relative to its parent's
        descriptor and checks it is the directory it listed: a link swapped in meanwhile is not entered."""
        try:
            with self._parent_fd(prefix) as (parent, name):
                base = prefix.rpartition("/")[0]
                for dirpath, _, files, dir_fd in os.fwalk(name, dir_fd=parent, follow_symlinks=False):
                    for file in files:
                        yield (f"{base}/{dirpath}/{file}" if base else f"{dirpath}/{file}"), file, dir_fd
        except FileNotFoundError:
            return  # nothing was ever written under prefix

    def delete_unreferenced(self, prefix: str, keep: set[str], older_than: float) -> int:
        """Delete regular files under `prefix` (torn temp files included) whose relative path is not in `keep`
        and whose mtime is before `older_than` (a Unix time). Returns how many were deleted. Symlinks are
        neither followed nor deleted (the sweep only collects what collectors wrote)."""
        deleted = 0
        for relpath, file, dir_fd in self._walk(prefix):
            try:
                info = os.stat(file, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_mtime < older_than and relpath not in keep:
                    os.unlink(file, dir_fd=dir_fd)
                    deleted += 1
            except FileNotFoundError:
                continue  # deleted meanwhile
        return deleted

    def delete(self, relpath: str) -> bool:
        """Remove the file at `relpath`: a regular file, or a symlink as a link (never its target). False if
        nothing is there; StorePathError if the way there passes through a link or the entry is something else."""
        try:
            with self._parent_fd(relpath) as (parent, name):
                return self._unlink_in(parent, name, relpath)
        except FileNotFoundError:
            return False

    def delete_many(self, relpaths: list[str]) -> int:
        """`delete` for many files, opening each directory once (a batch of evicted chunks shares a few task
        directories). A path that cannot be deleted is skipped and does not stop the others; returns how many
        were deleted."""
        by_dir: dict[str, list[str]] = {}
        for relpath in relpaths:
            by_dir.setdefault(relpath.rpartition("/")[0], []).append(relpath)
        deleted = 0
        for paths in by_dir.values():
            try:
                with self._parent_fd(paths[0]) as (parent, _):
                    for relpath in paths:
                        with contextlib.suppress(FileNotFoundError, StorePathError):
                            deleted += self._unlink_in(parent, self._check(relpath).rpartition("/")[2], relpath)
            except (FileNotFoundError, StorePathError):
                continue
        return deleted

    @staticmethod
    def _unlink_in(parent: int, name: str, relpath: str) -> bool:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            raise StorePathError(f"payload path {relpath!r} is neither a file nor a link; nothing deleted")
        os.unlink(name, dir_fd=parent)  # unlink never follows a link in its last segment
        return True
