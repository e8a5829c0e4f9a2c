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
        ours = args[-2:] == [b"rlfleet.launcher", service.encode()]
        if ppid == parent and ours and int(entry.name) not in (exclude or ()):
            return int(entry.name)
    return None


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, theirs, ...), read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, ppid in parents.items() if ppid == parent]
        found += kids
        frontier += kids
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
