"""Which run a starting coordinator serves: the one resume mechanism of `rlfleet up` and compose.

A run is a directory `runs/<name>/` under the data directory, its journal inside. Without an explicit name
(`RLFLEET_RUN`, or a `name=` override), the coordinator looks at the newest run of its config (`<config
name>__s<seed>__<start time>`, the names `rlfleet up` gives): one still running, or one with no journal yet, is
resumed, so a crashed or restarted coordinator carries on; a finished one (solved, stopped, out of budget) is
left alone and a new run starts, so a second `docker compose up` trains anew. An explicit name is used as given:
that run is resumed if it exists (a stopped one continues training: `rlfleet up --resume`), created otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rlfleet.coordinator.journal.database import stored_run_state
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout, new_run_name

# a run name's start time (shared.storage.layout.STAMP_FORMAT), and a counter for runs started in one second
_STAMP = re.compile(r"(\d{8}-\d{6})(?:-(\d+))?")


@dataclass(frozen=True)
class RunChoice:
    name: str
    why: str  # one line for the coordinator's log
    explicit: bool = False  # named by the user: a stopped run of that name is reopened


def _runs_of(runs_dir: Path, prefix: str) -> list[tuple[tuple[str, int], str]]:
    """Runs named `<prefix><stamp>[-<n>]`, as (sort key, name): oldest first."""
    found = []
    for path in runs_dir.iterdir() if runs_dir.is_dir() else ():
        m = _STAMP.fullmatch(path.name[len(prefix):]) if path.name.startswith(prefix) else None
        if m and path.is_dir():
            found.append(((m.group(1), int(m.group(2) or 0)), path.name))
    return sorted(found)


def choose_run(data_dir: Path, base: RunConfig, explicit: str | None = None, now: float | None = None) -> RunChoice:
    """The run to serve (see the module docstring); `base` is the config as loaded, before any renaming."""
    runs_dir = data_dir / "runs"
    if explicit:
        exists = RunLayout(data_dir, explicit).journal.exists()
        return RunChoice(explicit, f"run {explicit} named explicitly: {'resuming it' if exists else 'a new run'}",
                         explicit=True)
    prefix = f"{base.name}__s{base.seed}__"
    runs = _runs_of(runs_dir, prefix)
    if runs:
        newest = runs[-1][1]
        state = stored_run_state(RunLayout(data_dir, newest).journal)
        if state in (None, "running"):
            return RunChoice(newest, f"resuming run {newest}: the newest of {prefix}*, still running")
        why = f"a new run: the newest of {prefix}*, {newest}, is {state}"
    else:
        why = f"a new run: no run {prefix}* in {runs_dir}"
    name, counter = new_run_name(base, now), 1
    while (runs_dir / name).exists():  # a run of this config started within the same second
        counter += 1
        name = f"{new_run_name(base, now)}-{counter}"
    return RunChoice(name, f"{why}; starting {name}")
