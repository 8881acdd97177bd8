"""The testbed overlays (deploy/*/overlays/testbed) agree with the processes they run and with
the real node: arguments parse with the real entry points, the probes and ports are the ones
the processes listen on (127.0.0.1, the host network), the manager and the shim never share a
port, and the Pods land on the real node only. Rendered by kubectl's kustomize; no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.realnode.kubelet import NODE_LABEL, NODE_TAINT
from e2e.realnode.node import APISERVER_CONFIGMAP
from manager import main as manager_main
from tests.integration.deploy.manifests import DEPLOY, find, render
from worker_shim import main as shim_main

pytestmark = pytest.mark.integration

TESTBED = {
    "kfed-manager": (DEPLOY / "manager" / "overlays" / "testbed", manager_main.parse_args),
    "kfed-worker-shim": (DEPLOY / "worker" / "overlays" / "testbed", shim_main.parse_args),
}


@pytest.fixture(autouse=True)
def in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")


def pod_spec(name: str) -> dict[str, Any]:
    directory, _ = TESTBED[name]
    spec: dict[str, Any] = find(render(directory), "Deployment", name)["spec"]
    return spec


@pytest.mark.parametrize("name", sorted(TESTBED))
def test_a_testbed_pod_runs_on_the_real_node_with_what_the_bed_lacks(name: str) -> None:
    spec = pod_spec(name)
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert pod["hostNetwork"] is True
    key, value = NODE_LABEL
    assert pod["nodeSelector"] == {key: value}
    assert {"key": NODE_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    (container,) = pod["containers"]
    assert container["envFrom"] == [{"configMapRef": {"name": APISERVER_CONFIGMAP[1]}}]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    token = mounts["/var/run/secrets/kubernetes.io/serviceaccount"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == token]
    kinds = [next(iter(source)) for source in volume["projected"]["sources"]]
    assert kinds == ["serviceAccountToken", "configMap", "downwardAPI"]

    args = TESTBED[name][1](container["args"])
    assert args.metrics_host == "127.0.0.1"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == args.metrics_port
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["host"] == args.metrics_host
        assert container[probe]["httpGet"]["port"] == "metrics"


def test_the_manager_registers_its_webhook_by_url_on_ports_the_shim_does_not_use() -> None:
    manager = pod_spec("kfed-manager")["template"]["spec"]["containers"][0]
    shim = pod_spec("kfed-worker-shim")["template"]["spec"]["containers"][0]
    args = manager_main.parse_args(manager["args"])
    assert args.register_webhook_host == "127.0.0.1" and args.webhook_service is None
    assert args.webhook_cert_secret == "kfed-manager-webhook-cert"
    ports = {p["name"]: p["containerPort"] for p in manager["ports"]}
    assert ports["webhook"] == args.webhook_port
    shim_ports = {p["containerPort"] for p in shim["ports"]}
    assert not shim_ports & set(ports.values())


def test_the_visibility_apiservices_point_at_the_manager_s_visibility_port() -> None:
    manager_dir, _ = TESTBED["kfed-manager"]
    objects = render(manager_dir)
    services = [o for o in objects if o["kind"] == "APIService"]
    assert {s["spec"]["version"] for s in services} == {"v1beta1", "v1beta2"}
    (service,) = [
        o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "kfed-manager"
    ]
    port = next(
        p for p in service["spec"]["ports"] if p["port"] == services[0]["spec"]["service"]["port"]
    )
    manager = pod_spec("kfed-manager")["template"]["spec"]["containers"][0]
    args = manager_main.parse_args(manager["args"])
    ports = {p["name"]: p["containerPort"] for p in manager["ports"]}
    assert ports[port["targetPort"]] == args.visibility_port == 18082
    assert args.visibility_host == "0.0.0.0"  # the aggregator dials the Pod's (host) address
