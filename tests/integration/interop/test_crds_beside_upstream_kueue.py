"""kfed's CRDs on a cluster where upstream Kueue (v0.17, the interop bed's worker-1) runs and
has stored ResourceFlavors, ClusterQueues, LocalQueues and Workloads: every way kfed installs
its CRDs (``kfed crds --apply``, its ``--check-cluster``, ``helm install`` of charts/kfed-crds)
refuses to replace upstream's, which serve v1beta1 besides v1beta2, names what would be lost
and what to do, and changes nothing: every object stays readable in both versions (and by
kfed's own models, in v1beta2), and upstream Kueue keeps admitting with them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.examples import LIGHT_JOB
from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync
from manager.api import parse_object
from tests.integration.interop.conftest import KUEUE_WORKER, InteropClusters

pytestmark = [pytest.mark.integration, pytest.mark.full, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[3]
CRD_CHART = REPO / "charts" / "kfed-crds"
STORED_KINDS = ("resourceflavors", "clusterqueues", "localqueues", "workloads")
GROUP = "kueue.x-k8s.io"


def get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return result


def stored(cluster: LocalCluster, version: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every object of STORED_KINDS read through ``version``, by (kind, namespace, name)."""
    found = {}
    for kind in STORED_KINDS:
        for item in get(cluster, f"{kind}.{version}.{GROUP}", "-A")["items"]:
            meta = item["metadata"]
            found[(kind, meta.get("namespace", ""), meta["name"])] = item
    return found


def crds(cluster: LocalCluster) -> dict[str, tuple[str, list[str]]]:
    """Each kueue CRD's resourceVersion and served versions."""
    return {
        c["metadata"]["name"]: (
            c["metadata"]["resourceVersion"],
            [v["name"] for v in c["spec"]["versions"] if v["served"]],
        )
        for c in get(cluster, "crd")["items"]
        if c["spec"]["group"] == GROUP
    }


def submit(cluster: LocalCluster, namespace: str, name: str) -> None:
    job = yaml.safe_load(LIGHT_JOB.read_text())
    job["metadata"].update(name=name, namespace=namespace)
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "lq"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))


def admitted_by_upstream(cluster: LocalCluster, namespace: str, job: str) -> bool:
    for workload in get(cluster, "workloads", "-n", namespace)["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            # Finished: it was admitted and ran (kwok completes its Pod within seconds).
            conditions = workload.get("status", {}).get("conditions", [])
            return any(
                c["type"] in ("Admitted", "Finished") and c["status"] == "True" for c in conditions
            )
    return False


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def test_kfed_refuses_to_replace_upstream_kueue_s_crds_and_every_stored_object_stays_in_use(
    interop: InteropClusters,
) -> None:
    cluster = interop.fed.cluster(KUEUE_WORKER)
    namespace = f"beside-{uuid.uuid4().hex[:6]}"
    # What upstream stores: a namespace's LocalQueue (written through v1beta1, as an older
    # client would) on the article's ClusterQueue and flavors, and a Workload it admitted.
    cluster.kubectl("create", "namespace", namespace)
    local_queue = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": namespace},
        "spec": {"clusterQueue": "gpu-cq"},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(local_queue))
    submit(cluster, namespace, "before")
    wait_for_sync(
        lambda: admitted_by_upstream(cluster, namespace, "before"),
        timeout=120, what="upstream Kueue admits the first job", interval=0.5,
    )  # fmt: skip
    before = crds(cluster)
    assert all(served == ["v1beta1", "v1beta2"] for _, served in before.values()), before
    objects = {version: stored(cluster, version) for version in ("v1beta1", "v1beta2")}
    assert {kind for kind, *_ in objects["v1beta2"]} == set(STORED_KINDS)

    kfed = str(Path(sys.executable).with_name("kfed"))
    on_worker = ("--kubeconfig", str(cluster.kubeconfig))
    # Each installer is run only once the one before refused: one that went through would
    # replace the CRDs of the bed that every interop test shares.
    for argv in (("--check-cluster",), ("--apply",)):
        refused = run(kfed, "crds", *argv, *on_worker)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "nothing applied" in refused.stderr
        assert "clusterqueues.kueue.x-k8s.io: the installed CRD serves v1beta1" in refused.stderr
        assert "Keep the installed CRDs" in refused.stderr
        assert "applied " not in refused.stdout
    # Helm: a server-side dry run first (lookup reads the cluster, nothing is applied), then
    # the install itself.
    for dry_run in (("--dry-run=server",), ()):
        helm = run(
            str(binaries.helm_path()), f"--kubeconfig={cluster.kubeconfig}",
            "install", "kfed-crds", str(CRD_CHART), *dry_run,
        )  # fmt: skip
        assert helm.returncode != 0, helm.stdout[:2000]
        assert "serves v1beta1, which kfed's CRD does not serve" in helm.stderr, helm.stderr
        assert "install the kfed chart alone" in helm.stderr
    listed = run(str(binaries.helm_path()), f"--kubeconfig={cluster.kubeconfig}", "list", "-A")
    assert "kfed-crds" not in listed.stdout

    # Nothing changed: the same CRDs, every object readable in both versions, kfed's models
    # read the v1beta2 ones, and upstream Kueue keeps admitting.
    assert crds(cluster) == before
    for version, seen in objects.items():
        now = stored(cluster, version)
        missing = [key for key in seen if key not in now]
        assert not missing, f"{version}: {missing}"
        for key, item in seen.items():
            assert now[key]["metadata"]["uid"] == item["metadata"]["uid"], key
    for item in stored(cluster, "v1beta2").values():
        parse_object(item)
    submit(cluster, namespace, "after")
    wait_for_sync(
        lambda: admitted_by_upstream(cluster, namespace, "after"),
        timeout=120, what="upstream Kueue admits a job after kfed's refusal", interval=0.5,
    )  # fmt: skip
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
