"""Where the services run: in containers (docker-compose.yml) or as local processes (`rlfleet up`).

The service table (launcher/services.py) is written once against a `Place`, and every name that differs between
the two is asked of it: the path of a volume, the coordinator's URL and port, the address to bind, how to run
`rlfleet`, and a setting the user may change. `InContainers` answers with what compose needs, user settings as
`${VAR:-default}` for compose to substitute; `OnThisHost` answers with local paths, loopback addresses and the
values `rlfleet up` was given. Nothing is translated after the fact, so no compose syntax is ever parsed here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

CONTAINER_PORT = 8000


@dataclass(frozen=True)
class Volume:
    """A named compose volume: where containers mount it, and the directory under the data directory that
    stands in for it when the services run on this host ("" is the data directory itself)."""

    name: str
    mount: str
    local: str


class Place(Protocol):
    @property
    def port(self) -> int:
        """The coordinator's own port."""
        ...

    @property
    def coordinator_url(self) -> str:
        """How workers reach the coordinator."""
        ...

    @property
    def bind_host(self) -> str:
        """The address the coordinator listens on."""
        ...

    @property
    def repo(self) -> str:
        """The repository's files (configs/)."""
        ...

    @property
    def journal_synchronous(self) -> str:
        """The journal's SQLite `synchronous` (RLFLEET_DB_SYNCHRONOUS)."""
        ...

    def path(self, volume: Volume, *parts: str) -> str:
        """A path inside `volume`."""
        ...

    def rlfleet(self, *args: str) -> list[str]:
        """The command line running `rlfleet ARGS`."""
        ...

    def setting(self, name: str, default: str, why: str = "") -> str:
        """A value the user may set through the environment variable `name`, else `default`."""
        ...


@dataclass(frozen=True)
class UserSetting:
    name: str
    default: str
    why: str


@dataclass
class InContainers:
    """The services as compose runs them; records each user setting it renders (the file's header lists them)."""

    port: int = CONTAINER_PORT
    coordinator_url: str = f"http://coordinator:{CONTAINER_PORT}"
    bind_host: str = "0.0.0.0"
    repo: str = "/app"
    # Containers may outlive their coordinator's node: with NORMAL, a power loss or kernel crash there can roll
    # back commits whose replies already left (a published policy collectors act with); FULL syncs every commit.
    journal_synchronous: str = "FULL"
    settings: dict[str, UserSetting] = field(default_factory=dict)

    def path(self, volume: Volume, *parts: str) -> str:
        return "/".join((volume.mount, *parts))

    def rlfleet(self, *args: str) -> list[str]:
        return ["rlfleet", *args]

    def setting(self, name: str, default: str, why: str = "") -> str:
        known = self.settings.setdefault(name, UserSetting(name, default, why))
        if known.default != default:
            raise ValueError(f"{name} has two defaults in the service table ({known.default!r} and {default!r}): "
                             "give it one")
        return f"${{{name}:-{default}}}"


@dataclass
class OnThisHost:
    """The services as local processes of `rlfleet up`: volumes are directories of `data_dir`, everything
    listens and connects on loopback only, and user settings come from `values` (empty counts as unset, as
    compose's `:-` has it)."""

    data_dir: Path
    repo_dir: Path
    port: int
    values: dict[str, str] = field(default_factory=dict)

    @property
    def coordinator_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bind_host(self) -> str:
        return "127.0.0.1"

    @property
    def repo(self) -> str:
        return str(self.repo_dir)

    @property
    def journal_synchronous(self) -> str:
        """NORMAL: it survives a killed coordinator, and whatever takes this host down (power, kernel) takes
        every worker of the run with it, so no worker outlives a commit the journal rolled back; FULL would add
        an fsync per group commit for nothing."""
        return "NORMAL"

    def path(self, volume: Volume, *parts: str) -> str:
        return str(Path(self.data_dir, volume.local, *parts))

    def rlfleet(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "rlfleet.launcher", *args]

    def setting(self, name: str, default: str, why: str = "") -> str:
        return self.values.get(name) or default
