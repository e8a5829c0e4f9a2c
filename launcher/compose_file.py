"""docker-compose.yml, rendered from the service table (launcher/services.py).

The file is committed, because it is what `docker compose` users run, and it is never edited by hand: change the
table and regenerate it with

    python -m rlfleet.launcher.compose_file > docker-compose.yml

(tests/launcher/test_compose_file.py fails while the committed file differs). User settings stay `${VAR:-default}`
in the YAML, for compose to substitute; the file's header lists them with their defaults.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

from rlfleet.launcher.places import InContainers
from rlfleet.launcher.services import NETWORKS, VOLUMES, Service, fleet

WIDTH = 120
HEADER = """\
GENERATED from launcher/services.py by `python -m rlfleet.launcher.compose_file > docker-compose.yml`: edit the table
there, not this file.

rlfleet on one host: `docker compose up`, more collectors with `docker compose up --scale collector=4`.
`rlfleet up` runs the same services, commands and environments as local processes (launcher/up.py)."""


NETWORKS_ABOUT = (
    "`learners`: the learners and the coordinator; every other service is on `default` alone, out of reach of a "
    "learner group's rendezvous (unauthenticated, it unpickles what it reads).")


class _Dumper(yaml.SafeDumper):
    """Commands as one flow list (wrapped where long), everything else as blocks, keys in the table's order."""


class _Command(list[str]):
    pass


def _flow_list(dumper: yaml.SafeDumper, items: _Command) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=True)


_Dumper.add_representer(_Command, _flow_list)


def _comment(text: str, indent: str = "") -> str:
    lines = []
    for paragraph in text.splitlines():
        wrapped = textwrap.wrap(paragraph, WIDTH - len(indent) - 2, break_on_hyphens=False, break_long_words=False)
        lines += [paragraph] if paragraph.startswith(" ") else wrapped or [""]
    return "".join(f"{indent}# {line}".rstrip() + "\n" for line in lines)


def compose_spec(service: Service, at: InContainers) -> dict[str, Any]:
    """One service as compose declares it."""
    spec: dict[str, Any] = {}
    if service.profiles:
        spec["profiles"] = _Command(service.profiles)
    spec["image"] = service.image
    if service.build_args is not None:
        spec["build"] = {"context": ".", "dockerfile": "docker/Dockerfile", "args": service.build_args}
    if service.entrypoint:
        spec["entrypoint"] = _Command(service.entrypoint)
    spec["command"] = _Command(service.command)
    if service.network_mode:
        spec["network_mode"] = service.network_mode
    if service.networks:
        spec["networks"] = _Command(service.networks)
    if service.env:
        spec["environment"] = service.env
    if service.mounts:
        spec["volumes"] = [f"{m.volume.name}:{m.volume.mount}{':ro' if m.read_only else ''}" for m in service.mounts]
    if service.ports:
        spec["ports"] = service.ports
    if service.depends_on:
        spec["depends_on"] = {dep: {"condition": condition} for dep, condition in service.depends_on.items()}
    if service.healthcheck is not None:
        check = service.healthcheck
        spec["healthcheck"] = {"test": _Command(["CMD", *check.test]), "interval": check.interval,
                               "timeout": check.timeout, "retries": check.retries, "start_period": check.start_period}
    if not service.one_shot:
        spec["restart"] = service.restart
    if service.replicas_setting:
        spec["deploy"] = {"replicas": at.setting(service.replicas_setting, str(service.replicas),
                                                 f"{service.name} replicas")}
    elif service.replicas != 1:
        spec["deploy"] = {"replicas": service.replicas}
    return spec


def render() -> str:
    """The text of docker-compose.yml."""
    at = InContainers()
    services = fleet(at)
    body = []
    for service in services:
        block = yaml.dump({service.name: compose_spec(service, at)}, Dumper=_Dumper, sort_keys=False,
                          width=WIDTH - 40)  # PyYAML may overshoot by an item; indented by 2
        body.append(_comment(service.about, "  ") + textwrap.indent(block, "  "))
    volumes = yaml.dump({"volumes": {v.name: None for v in VOLUMES}}, Dumper=_Dumper, sort_keys=False)
    networks = yaml.dump({"networks": dict.fromkeys(NETWORKS)}, Dumper=_Dumper, sort_keys=False)
    settings = "Settings (environment variables, or an .env file beside this one):\n" + "\n".join(
        f"  {s.name}={s.default}  ({s.why})" for s in at.settings.values())
    return (_comment(HEADER) + "#\n" + _comment(settings) + "\nservices:\n" + "\n".join(body) + "\n"
            + volumes.replace(": null", ":") + "\n" + _comment(NETWORKS_ABOUT) + networks.replace(": null", ":"))


if __name__ == "__main__":
    print(render(), end="")
