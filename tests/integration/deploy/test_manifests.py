"""The rendered overlays agree with the processes they run: every container's arguments
parse with the real entry point, ports and names referenced by flags exist in the same
overlay, and the pod settings match the image (non-root user 65532, read-only root with a
writable /tmp). Rendered by kubectl's kustomize; no cluster needed."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from e2e.local import pki
from manager import main as manager_main
from tests.integration.deploy.manifests import (
    OVERLAYS,
    Obj,
    Overlay,
    container_args,
    find,
    overlay,
    render,
)
from worker_shim import main as shim_main

pytestmark = pytest.mark.integration

KFED_DEPLOYMENTS = {
    "kfed-manager": manager_main.parse_args,
    "kfed-worker-shim": shim_main.parse_args,
}
WITH_KFED = [o for o in OVERLAYS if o.path.startswith(("manager/", "worker/"))]


@pytest.fixture(autouse=True)
def in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def kfed_deployments(objects: list[Obj]) -> list[Obj]:
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    return [d for d in deployments if d["metadata"]["name"] in KFED_DEPLOYMENTS]


def with_mounted_certificates(pod: Obj, args: list[str], tmp_path: Path) -> list[str]:
    """``args`` as the process reads them in its Pod: ``--metrics-cert-dir`` names the mount
    of a Secret volume (checked here), whose pair cert-manager has written by then (a Pod
    waits for its Secret volume); a pair of a test CA stands in for it."""
    (container,) = pod["containers"]
    secrets = {v["name"] for v in pod["volumes"] if "secret" in v}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    cert_dir = flag(args, "--metrics-cert-dir")
    if cert_dir is None:
        return args
    assert mounts.get(cert_dir) in secrets, f"--metrics-cert-dir={cert_dir} mounts no Secret"
    pki.CertificateAuthority("test").issue("metrics", server_hosts=("localhost",)).write(
        tmp_path, "tls"
    )
    return [
        f"--metrics-cert-dir={tmp_path}" if a.startswith("--metrics-cert-dir=") else a for a in args
    ]


def flag(args: list[str], name: str) -> str | None:
    for arg in args:
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


@pytest.mark.parametrize("layer", WITH_KFED, ids=[o.path for o in WITH_KFED])
def test_kfed_pods_run_the_image_as_its_non_root_user_and_parse_their_arguments(
    layer: Overlay, tmp_path: Path
) -> None:
    objects = render(layer.directory)
    deployments = kfed_deployments(objects)
    assert len(deployments) == 1

    for deployment in deployments:
        name = deployment["metadata"]["name"]
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        args = KFED_DEPLOYMENTS[name](with_mounted_certificates(pod, container["args"], tmp_path))
        assert args.kubeconfig is None, "in a Pod: its ServiceAccount"
        assert args.namespace == deployment["metadata"]["namespace"] == "kueue-system"
        assert pod["serviceAccountName"] in {
            o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"
        }
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532, "the Dockerfile's USER"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == args.metrics_port
        # A secure port (components/metrics-secure) is probed over HTTPS, without a token.
        scheme = {"scheme": "HTTPS"} if args.metrics_secure else {}
        liveness, readiness = container["livenessProbe"], container["readinessProbe"]
        assert liveness["httpGet"] == {"path": "/healthz", "port": "metrics", **scheme}
        assert readiness["httpGet"] == {"path": "/readyz", "port": "metrics", **scheme}
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(args.metrics_port)


def test_the_manager_runs_two_replicas_behind_its_webhook_service() -> None:
    objects = render(overlay("manager/overlays/default").directory)
    deployment = find(objects, "Deployment", "kfed-manager")
    args = manager_main.parse_args(container_args(objects, "kfed-manager"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    assert deployment["spec"]["replicas"] == 2
    service = find(objects, "Service", args.webhook_service)
    webhook_port = next(p for p in service["spec"]["ports"] if p["name"] == "webhook")
    assert webhook_port["port"] == args.webhook_service_port
    assert ports[webhook_port["targetPort"]] == args.webhook_port
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert find(objects, "PodDisruptionBudget", "kfed-manager")["spec"]["minAvailable"] == 1


def test_the_shared_certificate_secret_is_the_one_the_manager_may_write() -> None:
    objects = render(overlay("manager/overlays/default").directory)
    args = manager_main.parse_args(container_args(objects, "kfed-manager"))
    role = find(objects, "Role", "kfed-manager-webhook-cert")
    registration = find(objects, "ClusterRole", "kfed-manager-webhook-registration")

    assert args.webhook_cert_secret in role["rules"][1]["resourceNames"]
    assert registration["rules"][1]["resourceNames"] == ["kfed-manager"]


def test_with_cert_manager_the_manager_serves_the_issued_secret_and_registers_nothing() -> None:
    objects = render(overlay("manager/overlays/cert-manager").directory)
    args = manager_main.parse_args(container_args(objects, "kfed-manager"))
    pod = find(objects, "Deployment", "kfed-manager")["spec"]["template"]["spec"]
    certificate = find(objects, "Certificate", "kfed-manager-webhook")

    assert args.webhook_service is None and args.register_webhook_host is None
    assert args.webhook_cert_secret is None
    mounts = pod["containers"][0]["volumeMounts"]
    mount = next(m for m in mounts if m["mountPath"] == str(args.webhook_cert_dir))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert volume["secret"]["defaultMode"] == 0o440, "the key: owner and group only"
    assert pod["securityContext"]["fsGroup"] == 65532, "the group that may read it: the process"
    webhook = find(objects, "MutatingWebhookConfiguration", "kfed-manager")
    service = webhook["webhooks"][0]["clientConfig"]["service"]
    assert (
        find(objects, "Service", service["name"])["metadata"]["namespace"] == (service["namespace"])
    )
    assert not [o for o in objects if o["metadata"]["name"] == "kfed-manager-webhook-cert"]


@pytest.mark.parametrize(
    "layer", [o for o in OVERLAYS if o.path.endswith("overlays/observability")], ids=str
)
def test_observability_overlays_send_traces_to_a_collector_they_deploy(layer: Overlay) -> None:
    objects = render(layer.directory)
    (deployment,) = kfed_deployments(objects)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}

    endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"] or "")
    name, namespace, *_ = (endpoint.hostname or "").split(".")
    service = find(objects, "Service", name)
    assert service["metadata"]["namespace"] == namespace
    assert endpoint.port in {p["port"] for p in service["spec"]["ports"]}
    assert env["OTEL_SERVICE_NAME"] == deployment["metadata"]["name"]
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"


def test_the_worker_shim_runs_two_replicas_that_elect_a_leader() -> None:
    objects = render(overlay("worker/overlays/default").directory)
    shim = find(objects, "Deployment", "kfed-worker-shim")
    args = shim_main.parse_args(container_args(objects, "kfed-worker-shim"))
    pod = shim["spec"]["template"]["spec"]

    assert shim["spec"]["replicas"] == 2
    assert args.leader_elect and args.mode == "admit", "only the leader admits"
    assert args.identity == "$(POD_NAME)", "each replica by its Pod's name"
    assert {e["name"] for e in pod["containers"][0]["env"]} >= {"POD_NAME"}
    assert shim["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == (shim["spec"]["selector"]["matchLabels"])
    )
    budget = find(objects, "PodDisruptionBudget", "kfed-worker-shim")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"] == shim["spec"]["selector"]
    assert budget["metadata"]["namespace"] == shim["metadata"]["namespace"]
    # The Lease it elects on is in the namespace where its Role lets it write Leases.
    role = find(objects, "Role", "kfed-worker-shim")
    assert role["metadata"]["namespace"] == args.namespace
    assert any("leases" in r["resources"] and "update" in r["verbs"] for r in role["rules"])


def test_the_fence_only_overlay_leaves_kueue_its_crds_and_namespace() -> None:
    objects = render(overlay("worker/overlays/fence-only").directory)
    args = shim_main.parse_args(container_args(objects, "kfed-worker-shim"))

    assert args.mode == "fence-only"
    assert not [o for o in objects if o["kind"] in ("CustomResourceDefinition", "Namespace")]
    find(objects, "PodDisruptionBudget", "kfed-worker-shim")
