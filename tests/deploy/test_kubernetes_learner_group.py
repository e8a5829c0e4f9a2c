"""deploy/kubernetes/overlays/learner-group: a learner group of 2 on Kubernetes, rendered and checked.

No cluster is reached: the overlay is rendered by kustomize and validated against the API schemas like the other
renders (tests/deploy/test_kubernetes.py, whose helpers and example tree this uses), and what must agree for the
group to form is asserted: the StatefulSet's pods, the run's learner.replicas, and a rendezvous host that is pod 0
under the headless service.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from rlfleet.coordinator.overrides import parse_overrides
from rlfleet.shared.config.run_config import load_run_config
from tests.support.kubernetes import KUBE_VERSIONS, Obj, container, env_values, kustomize, one, workload
from tests.support.repo import REPO


@pytest.fixture(scope="module")
def group(tree: Path) -> list[Obj]:
    return kustomize(tree / "overlays" / "learner-group")


def overrides(objs: list[Obj]) -> dict[str, object]:
    return parse_overrides(env_values(objs, workload(objs, "coordinator"))["RLFLEET_OVERRIDES"])


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_the_group_overlay_validates_against_the_kubernetes_schemas(group: list[Obj], version: str) -> None:
    assert sorted({o["kind"] for o in group}) == ["ConfigMap", "Deployment", "NetworkPolicy", "Secret", "Service",
                                                  "StatefulSet"]
    for obj in group:
        assert kubernetes_validate.validate(obj, version, strict=True) == version


def test_one_learner_pod_per_rank_of_the_runs_group(group: list[Obj]) -> None:
    learners = workload(group, "learner")
    settings = overrides(group)
    config = load_run_config(REPO / "configs" / "cartpole_dqn.yaml", settings)  # the coordinator's own loading
    assert learners["spec"]["replicas"] == config.learner.replicas == 2
    assert learners["spec"]["podManagementPolicy"] == "Parallel"  # torchrun waits for every rank anyway


def test_the_rendezvous_is_pod_0_under_the_headless_service(group: list[Obj]) -> None:
    learners, service = workload(group, "learner"), one(group, "Service", "rlfleet-learner")
    host, _, port = str(overrides(group)["learner.rendezvous"]).rpartition(":")
    name = learners["metadata"]["name"]
    assert learners["spec"]["serviceName"] == service["metadata"]["name"]
    assert host == f"{name}-0.{service['metadata']['name']}"  # a StatefulSet pod's DNS name in its namespace
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= pod_labels(learners).items()
    assert not service["spec"]["selector"].items() <= pod_labels(workload(group, "collector")).items()
    (served,) = service["spec"]["ports"]
    ports = {p["name"]: p["containerPort"] for p in container(learners)["ports"]}
    assert int(port) == served["port"] == ports[served["targetPort"]] == 29400


def test_the_single_learner_of_the_example_is_unchanged_beside_the_group(tree: Path, group: list[Obj]) -> None:
    example = kustomize(tree / "overlays" / "example")
    assert workload(example, "learner")["spec"]["replicas"] == 1
    assert not env_values(example, workload(example, "coordinator"))["RLFLEET_OVERRIDES"]
    # everything else the group overlay renders is the example's (images, namespace, secrets, collectors)
    assert container(workload(group, "learner"))["image"] == container(workload(example, "learner"))["image"]
    assert {o["metadata"].get("namespace") for o in group} == {"rlfleet"}
    assert workload(group, "collector")["spec"]["replicas"] == workload(example, "collector")["spec"]["replicas"]


def pod_labels(obj: Obj) -> dict[str, str]:
    labels: dict[str, str] = obj["spec"]["template"]["metadata"]["labels"]
    return labels


def test_only_learner_pods_may_connect_to_learner_pods(group: list[Obj]) -> None:
    """The rendezvous store authenticates no one and torch's rendezvous unpickles what it reads: a NetworkPolicy
    selects every learner pod, admits learner pods alone (any TCP port: the rendezvous and the ranks' ephemeral
    ones), and so denies every other ingress; no other policy opens them again."""
    learners = workload(group, "learner")
    policies = [o for o in group if o["kind"] == "NetworkPolicy"]
    selecting = [p for p in policies if p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(learners).items()]
    assert len(selecting) == 1, policies
    (policy,) = selecting
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]  # egress stays open: coordinator, object store, DNS
    assert set(spec["podSelector"]) == {"matchLabels"}
    (rule,) = spec["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # no namespaceSelector / ipBlock: this namespace's pods only
    admitted = peer["podSelector"]["matchLabels"]
    assert admitted.items() <= pod_labels(learners).items()
    for other in ("coordinator", "collector", "evaluator"):
        assert not admitted.items() <= pod_labels(workload(group, other)).items(), other
    (ports,) = rule["ports"]
    assert ports == {"protocol": "TCP", "port": 1, "endPort": 65535}
    rendezvous = int(str(overrides(group)["learner.rendezvous"]).rpartition(":")[2])
    assert ports["port"] <= rendezvous <= ports["endPort"]
    assert {o["metadata"].get("namespace") for o in policies} == {learners["metadata"]["namespace"]}
