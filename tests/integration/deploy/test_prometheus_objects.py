"""Prometheus Operator's objects and secure metrics in deploy/, rendered by kubectl's kustomize
(no cluster): each side's ServiceMonitor finds its Service and scrapes the port the process
serves metrics on; with components/metrics-secure the process serves securely, is probed over
HTTPS, may create the reviews it makes, and the ServiceMonitor scrapes over HTTPS with a
token that ClusterRole kfed-metrics-reader lets read /metrics. Each component also works
alone. The alerts themselves: tests/integration/deploy/test_alert_rules.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from manager import main as manager_main
from tests.integration.deploy.manifests import (
    DEPLOY,
    Obj,
    container_args,
    find,
    overlay,
    render,
)
from worker_shim import main as shim_main

pytestmark = pytest.mark.integration

SIDES = {
    "manager": ("kfed-manager", manager_main.parse_args),
    "worker": ("kfed-worker-shim", shim_main.parse_args),
}


@pytest.fixture(autouse=True)
def in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def with_components(tmp_path: Path, side: str, *components: str) -> list[Obj]:
    """The side's base, with ``components`` listed in that order (kustomize only accepts
    relative paths)."""
    here = tmp_path / "kustomization"
    here.mkdir()
    (here / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(DEPLOY / side / "base", here)],
                "components": [
                    os.path.relpath(DEPLOY / side / "components" / c, here) for c in components
                ],
            }
        )
    )
    return render(here)


def scrape_endpoint(objects: list[Obj], name: str) -> tuple[Obj, int]:
    """The ServiceMonitor's endpoint and the container port it reaches through the Service."""
    monitor = find(objects, "ServiceMonitor", name)
    service = find(objects, "Service", name)
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    (endpoint,) = monitor["spec"]["endpoints"]
    port = next(p for p in service["spec"]["ports"] if p["name"] == endpoint["port"])
    container = find(objects, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    return endpoint, ports[port["targetPort"]]


def bound_cluster_roles(objects: list[Obj], account: str, namespace: str) -> set[str]:
    return {
        b["roleRef"]["name"]
        for b in objects
        if b["kind"] == "ClusterRoleBinding"
        and {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        in b.get("subjects", [])
    }


@pytest.mark.parametrize("side", SIDES)
def test_the_prometheus_overlay_scrapes_the_secure_port_with_a_token(side: str) -> None:
    name, parse = SIDES[side]
    objects = render(overlay(f"{side}/overlays/prometheus").directory)
    args = parse(container_args(objects, name))

    endpoint, container_port = scrape_endpoint(objects, name)

    assert args.metrics_secure and container_port == args.metrics_port
    assert endpoint["path"] == "/metrics" and endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}, "a self-signed certificate"
    pod = find(objects, "Deployment", name)["spec"]["template"]["spec"]
    assert "kfed-metrics-auth" in bound_cluster_roles(
        objects, pod["serviceAccountName"], "kueue-system"
    )
    auth = find(objects, "ClusterRole", "kfed-metrics-auth")["rules"]
    assert {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in auth} == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }
    reader = find(objects, "ClusterRole", "kfed-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = find(objects, "ClusterRoleBinding", "kfed-metrics-reader")
    assert binding["roleRef"]["name"] == "kfed-metrics-reader"
    assert find(objects, "PrometheusRule", name)["metadata"]["namespace"] == "kueue-system"


@pytest.mark.parametrize("side", SIDES)
def test_prometheus_alone_scrapes_plain_http(side: str, tmp_path: Path) -> None:
    name, parse = SIDES[side]
    objects = with_components(tmp_path, side, "prometheus")
    args = parse(container_args(objects, name))

    endpoint, container_port = scrape_endpoint(objects, name)

    assert not args.metrics_secure
    assert endpoint["scheme"] == "http" and "bearerTokenFile" not in endpoint
    assert container_port == args.metrics_port
    assert not [o for o in objects if o["metadata"]["name"].startswith("kfed-metrics-")]


@pytest.mark.parametrize("side", SIDES)
def test_metrics_secure_alone_needs_no_prometheus_operator(side: str, tmp_path: Path) -> None:
    name, parse = SIDES[side]
    objects = with_components(tmp_path, side, "metrics-secure")
    args = parse(container_args(objects, name))

    assert args.metrics_secure
    assert not [o for o in objects if o["apiVersion"].startswith("monitoring.coreos.com/")]
    container = find(objects, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
