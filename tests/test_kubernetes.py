"""deploy/kubernetes, checked offline: every manifest against Kubernetes' own schemas
(kubernetes-validate, strict: an unknown field is an error), and what the schemas cannot say: the
selectors find the pods, the probes ask the service's open paths, each pod migrates before it
serves, nothing runs as root, the secrets' keys are the ones docs/kubernetes.md creates, the
image's tag is this release's, and the autoscaler scales this Deployment on a metric the service
exposes. No cluster runs here: this is the whole of what is verified."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from simplequeue.api.auth import OPEN_PATHS

kubernetes_validate = pytest.importorskip("kubernetes_validate")

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
KUBERNETES = "1.30.0"
"""The oldest Kubernetes still supported upstream when these were written: what they must fit."""
SECRET_KEYS = {"database-url", "api-keys"}


def documents(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        for path in sorted(folder.glob("*.yaml"))
    }


def kinds(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        d["kind"]: d for name, ds in documents(folder).items() if name != "kustomization.yaml" for d in ds
    }


@pytest.mark.parametrize("folder", [DEPLOY, DEPLOY / "autoscaling"], ids=["base", "autoscaling"])
def test_each_kustomization_lists_every_manifest_beside_it(folder: Path) -> None:
    found = documents(folder)
    [kustomization] = found.pop("kustomization.yaml")
    assert sorted(kustomization["resources"]) == sorted(found)


def test_every_manifest_fits_kubernetes_schemas() -> None:
    checked = 0
    for docs in documents(DEPLOY).values():
        for doc in docs:
            if doc["kind"] == "Kustomization":
                continue
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
            checked += 1
    assert checked == 3


def test_the_selectors_find_the_pods_and_the_probes_ask_open_paths() -> None:
    found = kinds(DEPLOY)
    deployment, service, budget = found["Deployment"], found["Service"], found["PodDisruptionBudget"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for selector in (
        deployment["spec"]["selector"]["matchLabels"],
        service["spec"]["selector"],
        budget["spec"]["selector"]["matchLabels"],
    ):
        assert selector.items() <= labels.items()
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in OPEN_PATHS  # no key needed
    [port] = container["ports"]
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]


def test_each_pod_migrates_first_and_nothing_runs_as_root() -> None:
    pod = kinds(DEPLOY)["Deployment"]["spec"]["template"]["spec"]
    [migrate] = pod["initContainers"]
    [server] = pod["containers"]
    assert migrate["args"] == ["migrate"]
    assert server["args"] == ["serve"]
    env = {e["name"]: e for e in server["env"]}
    assert env["SIMPLEQUEUE_MIGRATE_ON_START"]["value"] == "false"
    assert env["SIMPLEQUEUE_HOST"]["value"] == "0.0.0.0"  # inside the pod; the Service fronts it
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    for container in (migrate, server):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        assert "memory" in container["resources"]["limits"]


def test_the_secret_keys_are_the_documented_ones_and_the_image_is_this_release() -> None:
    pod = kinds(DEPLOY)["Deployment"]["spec"]["template"]["spec"]
    used = {
        (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for c in pod["initContainers"] + pod["containers"]
        for e in c["env"]
        if "valueFrom" in e
    }
    assert used == {("simplequeue", key) for key in SECRET_KEYS}
    guide = (ROOT / "docs" / "kubernetes.md").read_text(encoding="utf-8")
    for key in SECRET_KEYS:
        assert f"{key}=" in guide, f"docs/kubernetes.md does not create the secret's {key}"
    [kustomization] = documents(DEPLOY)["kustomization.yaml"]
    [image] = kustomization["images"]
    assert {c["image"] for c in pod["initContainers"] + pod["containers"]} == {image["name"]}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert image["newTag"] == version


def test_the_autoscaler_scales_the_deployment_on_a_metric_the_service_exposes() -> None:
    [scaled] = documents(DEPLOY / "autoscaling")["scaledobject.yaml"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"  # a CRD: no schema of Kubernetes' own
    assert scaled["spec"]["scaleTargetRef"]["name"] == kinds(DEPLOY)["Deployment"]["metadata"]["name"]
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    [trigger] = scaled["spec"]["triggers"]
    metrics = (ROOT / "app" / "simplequeue" / "api" / "metrics.py").read_text(encoding="utf-8")
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"].startswith("sum(simplequeue_queue_items{")
    assert '"simplequeue_queue_items"' in metrics
