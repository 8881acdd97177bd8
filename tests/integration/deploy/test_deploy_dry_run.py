"""Every overlay of deploy/ is accepted by a real kube-apiserver: rendered by kubectl's
kustomize and applied with a server-side dry run (schemas, RBAC objects, webhook
configuration, Deployments...), the manager's on the lite manager cluster, the workers' on
a lite worker.

What a dry run cannot create on its own exists for real first: the namespaces the overlay
declares or puts its objects in (shared, fixed names, harmless to leave) and, for the
cert-manager overlay, stand-ins for cert-manager's CRDs, for the prometheus overlays
stand-ins for Prometheus Operator's (tests/integration/deploy/data). kfed's own CRDs are
already installed by the ``kueue_crds`` fixture; applying them again is part of the dry run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from e2e.local.federation import LocalFederation
from tests.integration.deploy.manifests import OVERLAYS, Obj, Overlay, kubectl, render_text

pytestmark = pytest.mark.integration

CERT_MANAGER_CRDS = Path(__file__).parent / "data" / "cert-manager-crds.yaml"
PROMETHEUS_OPERATOR_CRDS = Path(__file__).parent / "data" / "prometheus-operator-crds.yaml"
STAND_INS = {
    "cert-manager.io/": CERT_MANAGER_CRDS,
    "monitoring.coreos.com/": PROMETHEUS_OPERATOR_CRDS,
}
"""API group of custom resources an overlay uses but does not define -> CRD stand-ins."""
FIELD_MANAGER = "kfed-deploy-test"


def apply(kubeconfig: Path, manifest: str, *, dry_run: bool) -> subprocess.CompletedProcess[str]:
    argv = [
        kubectl(),
        f"--kubeconfig={kubeconfig}",
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "-f",
        "-",
    ]
    if dry_run:
        argv.insert(-2, "--dry-run=server")
    return subprocess.run(
        argv, input=manifest, capture_output=True, text=True, timeout=180, check=False
    )


def stand_ins(objects: list[Obj]) -> list[Path]:
    return [
        crds
        for group, crds in STAND_INS.items()
        if any(o["apiVersion"].startswith(group) for o in objects)
    ]


def prerequisites(objects: list[Obj]) -> str:
    """What must exist for real before the dry run: the namespaces the overlay's objects live
    in (declared by it, or, for the fence-only worker, Kueue's already there), and the CRDs
    of custom resources the overlay uses but does not define (cert-manager's, Prometheus
    Operator's)."""
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    names |= {o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        for name in sorted(names)
    ]
    text = yaml.safe_dump_all(namespaces)
    for crds in stand_ins(objects):
        text += "---\n" + crds.read_text()
    return text


@pytest.mark.parametrize("overlay", OVERLAYS, ids=[o.path for o in OVERLAYS])
def test_every_overlay_is_accepted_by_the_apiserver(
    kueue_crds: LocalFederation, overlay: Overlay
) -> None:
    cluster = kueue_crds.cluster("manager" if overlay.cluster == "manager" else "worker-1")
    manifest = render_text(overlay.directory)
    objects = [o for o in yaml.safe_load_all(manifest) if o]

    if needed := prerequisites(objects):  # deploy/crds needs nothing
        ready = apply(cluster.kubeconfig, needed, dry_run=False)
        assert ready.returncode == 0, ready.stderr
    for crds in stand_ins(objects):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))
    result = apply(cluster.kubeconfig, manifest, dry_run=True)

    assert result.returncode == 0, result.stderr
    applied = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    assert len(applied) == len(objects), result.stdout
