"""One coordinator per journal: an exclusive lock on a file beside the journal, held for the coordinator's life.

Two coordinators writing one journal would each hold their own in-memory state and commit over each other's
rows: acknowledged chunks, published versions and leases silently lost or duplicated. SQLite's own locks do not
prevent it (WAL lets the second writer in between the first one's transactions), so a coordinator takes
`flock(LOCK_EX | LOCK_NB)` on `<journal>.lock` before it opens the journal and keeps the descriptor open until it
stops. The kernel drops the lock with the last descriptor, so a coordinator killed with SIGKILL (or a crashed
node's, once its process is gone) never leaves a stale lock behind: the lock file may stay, unlocked, and the next
coordinator takes it at once. The file holds the holder's pid and host, only to name it in the refusal.

flock is advisory and local: it binds coordinators that share a kernel, or a file system that forwards flock
(local disks; NFSv4 maps it to byte-range locks). Kubernetes' ReadWriteOnce volume keeps a second node out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from pathlib import Path


class JournalInUse(RuntimeError):
    """Another live coordinator holds the journal's lock."""


class JournalLock:
    """The held lock; `release` (or the process's end, however it ends) lets the next coordinator in."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    @staticmethod
    def lock_path(journal: Path) -> Path:
        return journal.with_name(journal.name + ".lock")

    @classmethod
    def acquire(cls, journal: Path) -> JournalLock:
        """Lock `journal` for this process, or raise JournalInUse naming the holder and what to change."""
        path = cls.lock_path(journal)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process that wrote no pid yet"
            os.close(fd)
            raise JournalInUse(
                f"journal {journal} is in use by another coordinator ({holder}; lock {path}). Stop that coordinator "
                f"first, or give this one another run (RLFLEET_RUN), data directory (RLFLEET_DATA_DIR) or journal "
                f"(RLFLEET_DB_PATH)") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Unlock (closing the descriptor drops the flock). The file stays: removing it would let a coordinator
        that opened it a moment ago lock an unlinked file while a third one creates and locks a new one."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = -1
