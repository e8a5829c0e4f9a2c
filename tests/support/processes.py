"""Finding the service processes `rlfleet up` started, so a test can kill one as a fault would."""

from __future__ import annotations

from pathlib import Path


def launcher_child(parent: int, service: str, exclude: list[int] | None = None) -> int | None:
    """pid of a `python -m rlfleet.launcher <service>` started by `parent`, other than those in `exclude` (read from
    /proc, no extra dependency)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        args = [a for a in argv if a]
        if ppid == parent and args[-2:] == [b"launcher", service.encode()] and int(entry.name) not in (exclude or ()):
            return int(entry.name)
    return None
