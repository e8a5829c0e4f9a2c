"""Translate docker-compose.yml into local processes, so `rlfleet up` runs exactly what compose declares.

The only differences are explicit substitutions applied to every command, environment value and
healthcheck: the container's `/data` volume becomes a local directory, `/secrets/all` (the tokens volume) that
same directory (so `data/tokens.json` is where `rlfleet status` looks) and `/secrets/<scope>` its `secrets/<scope>`,
`/app` the repository, the service name `coordinator` becomes 127.0.0.1 and its container port the local port,
`0.0.0.0` becomes 127.0.0.1 (tests bind loopback only), and `rlfleet` becomes this Python running `-m launcher`.
`${VAR:-default}` is interpolated from the given environment, as compose would. Services of a profile
(`profiles:`, e.g. the s3 profile's SeaweedFS) are left out, as compose leaves them out unless the profile is
asked for.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")
CONTAINER_PORT = 8000


@dataclass
class LocalService:
    name: str
    argv: list[str]
    env: dict[str, str]
    replicas: int = 1
    depends_on: dict[str, str] = field(default_factory=dict)
    healthcheck: list[str] | None = None


def interpolate(text: str, environ: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        value = environ.get(m.group(1))
        return value if value else (m.group(2) or "")

    return _VAR.sub(repl, text)


@dataclass(frozen=True)
class Translation:
    """Container names -> local ones: `replace` applies anywhere in a string, `mounts` to path prefixes."""

    replace: tuple[tuple[str, str], ...]
    mounts: tuple[tuple[str, str], ...]

    @classmethod
    def for_host(cls, data_dir: Path, repo: Path, port: int) -> Translation:
        return cls(
            replace=((f"http://coordinator:{CONTAINER_PORT}", f"http://127.0.0.1:{port}"),
                     (f"127.0.0.1:{CONTAINER_PORT}", f"127.0.0.1:{port}"),
                     ("0.0.0.0", "127.0.0.1")),
            mounts=(("/data", str(data_dir)), ("/secrets/all", str(data_dir)),
                    ("/secrets", str(data_dir / "secrets")), ("/app", str(repo))),
        )

    def apply(self, text: str, environ: dict[str, str]) -> str:
        text = interpolate(text, environ)
        for container, local in self.replace:
            text = text.replace(container, local)
        head, sep, tail = text.partition("=")  # `SCOPE=/secrets/...` maps like the bare path
        for container, local in self.mounts:  # the first that matches: a local path is never mapped again
            for prefix, path in (("", text), (head + sep, tail) if sep else ("", "")):
                if path == container or path.startswith(container + "/"):
                    return prefix + local + path[len(container):]
        return text


def _argv(command: list[str], environ: dict[str, str], tr: Translation) -> list[str]:
    argv = [tr.apply(str(part), environ) for part in command]
    if argv and argv[0] == "rlfleet":
        argv = [sys.executable, "-m", "launcher", *argv[1:]]
    return argv


def load_services(compose_file: Path, environ: dict[str, str], data_dir: Path, repo: Path,
                  port: int) -> dict[str, LocalService]:
    doc = yaml.safe_load(compose_file.read_text())
    tr = Translation.for_host(data_dir, repo, port)
    services = {}
    for name, spec in doc["services"].items():
        if spec.get("profiles"):
            continue
        env = {str(k): tr.apply(str(v), environ) for k, v in (spec.get("environment") or {}).items()}
        if env.get("RLFLEET_PORT") == str(CONTAINER_PORT):
            env["RLFLEET_PORT"] = str(port)
        check = (spec.get("healthcheck") or {}).get("test")
        services[name] = LocalService(
            name=name,
            argv=_argv(spec["command"], environ, tr),
            env=env,
            replicas=int(interpolate(str((spec.get("deploy") or {}).get("replicas", 1)), environ)),
            depends_on={dep: cond.get("condition", "service_started")
                        for dep, cond in (spec.get("depends_on") or {}).items()},
            healthcheck=_argv(check[1:], environ, tr) if check and check[0] == "CMD" else None,
        )
    return services
