"""The Helm chart for real: kfed's image on a real kubelet in the test bed, installed with
Helm (built by e2e/binaries/build-helm.sh). ``helm install`` of charts/kfed-crds on both
clusters, then of charts/kfed as the worker side on worker-1 and the manager side on the
manager (the test bed's values, charts/kfed/testbed: the same objects as deploy/*/overlays/
testbed); the article's jobs complete; ``helm upgrade`` of the manager to a changed value
rolls its Pod while a job runs, and that job runs once and completes; ``helm uninstall --wait``
of every release returns, and leaves every CRD and every Kueue object in place, and of kfed's
ClusterRoles only the two aggregated roles it keeps.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from e2e import binaries
from e2e.examples import LIGHT_JOB
from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync
from tests.integration.realnode.conftest import RealBed
from tests.integration.realnode.federating import (
    MANAGER_METRICS,
    NAMESPACE,
    SHIM_METRICS,
    crds_established,
    diagnose,
    get,
    install_and_wait_ready,
    pod_ready,
    readyz,
    register_worker_1,
    run_the_article,
    scheduled_pods,
    wait_for_jobs,
)

pytestmark = [pytest.mark.integration, pytest.mark.full, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "kfed"
CRD_CHART = REPO / "charts" / "kfed-crds"
TESTBED = CHART / "testbed"
SIDE_VALUES = {
    "manager": TESTBED / "manager-values.yaml",
    "worker-1": TESTBED / "worker-values.yaml",
}
KUEUE_GROUP = "kueue.x-k8s.io"
# Long enough to still run while the manager's Pod is replaced (kwok completes a Pod after
# the delay its annotation names).
RUNS_THROUGH_THE_UPGRADE = "60s"


def helm(cluster: LocalCluster, *args: str) -> str:
    result = subprocess.run(
        [str(binaries.helm_path()), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"helm {' '.join(args)} on {cluster.name}:\n{result.stderr}"
    return result.stdout


def install_kfed(cluster: LocalCluster, *values: str, verb: str = "install") -> None:
    helm(cluster, verb, "kfed", str(CHART), "--namespace", NAMESPACE, "--create-namespace",
         "-f", str(TESTBED / "real-node-values.yaml"), "-f", str(SIDE_VALUES[cluster.name]),
         *values)  # fmt: skip


def kueue_objects(cluster: LocalCluster) -> set[tuple[str, str, str, str]]:
    """(resource, namespace, name, uid) of every object of every kueue.x-k8s.io kind."""
    resources = cluster.kubectl(
        "api-resources", f"--api-group={KUEUE_GROUP}", "-o", "name"
    ).stdout.split()
    found = set()
    for resource in resources:
        for item in get(cluster, resource, "-A")["items"]:
            meta = item["metadata"]
            found.add((resource, meta.get("namespace", ""), meta["name"], meta["uid"]))
    return found


def pods_of(cluster: LocalCluster, app: str) -> list[object]:
    selector = f"app.kubernetes.io/name={app}"
    items: list[object] = get(cluster, "pods", "-n", NAMESPACE, "-l", selector)["items"]
    return items


KEPT_ROLES = {"kfed-batch-admin-role", "kfed-batch-user-role"}
"""The aggregated roles for people, which helm uninstall keeps (deploy/roles/user-roles.yaml)."""


def cluster_role_names(cluster: LocalCluster) -> set[str]:
    return {c["metadata"]["name"] for c in get(cluster, "clusterroles")["items"]}


def crd_names(cluster: LocalCluster) -> set[str]:
    return {
        c["metadata"]["name"]
        for c in get(cluster, "crd")["items"]
        if c["spec"]["group"] == KUEUE_GROUP
    }


def long_job(name: str) -> str:
    """The article's light job under another name, its Pod running for a minute."""
    job = yaml.safe_load(LIGHT_JOB.read_text())
    job["metadata"]["name"] = name
    job["spec"]["template"].setdefault("metadata", {})["annotations"] = {
        "pod-complete.stage.kwok.x-k8s.io/delay": RUNS_THROUGH_THE_UPGRADE
    }
    return yaml.safe_dump(job)


def workload_of(cluster: LocalCluster, job: str) -> dict[str, object] | None:
    for workload in get(cluster, "workloads", "-n", "ml-jobs")["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            found: dict[str, object] = workload
            return found
    return None


def admitted(workload: dict[str, object] | None) -> bool:
    status = workload.get("status") if workload else None
    conditions = status.get("conditions", []) if isinstance(status, dict) else []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def test_helm_installs_both_sides_upgrades_without_losing_a_workload_and_uninstalls_cleanly(
    real_bed: RealBed, tmp_path: Path
) -> None:
    manager, worker = real_bed.fed.cluster("manager"), real_bed.fed.cluster("worker-1")
    timings = real_bed.timings

    # The CRDs, their own release on each cluster.
    for local in (manager, worker):
        started = time.monotonic()
        helm(local, "install", "kfed-crds", str(CRD_CHART))
        crds_established(local)
        timings[f"{local.name}: helm install kfed-crds -> Established"] = time.monotonic() - started
    ours = crd_names(manager)
    assert len(ours) == 11 and crd_names(worker) == ours

    timings["worker side: helm install -> /readyz"], shim = install_and_wait_ready(
        real_bed, "worker-1", lambda: install_kfed(worker), "kfed-worker-shim", SHIM_METRICS
    )
    timings["manager side: helm install -> /readyz"], first = install_and_wait_ready(
        real_bed, "manager", lambda: install_kfed(manager), "kfed-manager", MANAGER_METRICS
    )
    for ran, cluster in ((shim, "worker-1"), (first, "manager")):
        assert ran["spec"]["nodeName"] == real_bed.nodes[cluster].name
        assert ran["metadata"]["labels"]["app.kubernetes.io/name"] in {
            "kfed-manager",
            "kfed-worker-shim",
        }

    register_worker_1(real_bed, tmp_path)
    timings["article's jobs: submitted -> Complete"] = run_the_article(real_bed)

    # helm upgrade to a changed value while a job runs on worker-1: the manager's Pod is
    # replaced (Recreate on the bed), the job's Workload stays, runs once, completes.
    manager.kubectl("apply", "-f", "-", input=long_job("upgrade-job"))
    wait_for_sync(
        lambda: admitted(workload_of(manager, "upgrade-job"))
        and bool(scheduled_pods(worker, "upgrade-job")),
        timeout=180, what="upgrade-job admitted and its Pod placed on worker-1", interval=0.5,
    )  # fmt: skip
    before = {(k[0], k[1], k[2]): k[3] for k in kueue_objects(manager)}
    started = time.monotonic()
    install_kfed(manager, "--set", "manager.failoverPolicy=fast", verb="upgrade")

    def replaced() -> dict[str, object] | None:
        pod = pod_ready(manager, "kfed-manager")
        if pod is None or pod["metadata"]["name"] == first["metadata"]["name"]:
            return None
        return pod if readyz(MANAGER_METRICS) == 200 else None

    try:
        second = wait_for_sync(replaced, timeout=240, what="the upgraded manager Pod Ready")
    except TimeoutError:
        pytest.fail(diagnose(real_bed, "manager", "kfed-manager"))
    timings["manager side: helm upgrade -> new Pod /readyz"] = time.monotonic() - started
    args = second["spec"]["containers"][0]["args"]  # type: ignore[index]
    assert "--failover-policy=fast" in args
    wait_for_jobs(real_bed, ("upgrade-job",), what="upgrade-job (running through the upgrade)")
    assert len(scheduled_pods(worker, "upgrade-job")) == 1, "it ran once"
    after = {(k[0], k[1], k[2]): k[3] for k in kueue_objects(manager)}
    lost = {key for key, uid in before.items() if after.get(key) != uid}
    assert not lost, f"objects gone or replaced by the upgrade: {sorted(lost)}"

    # helm uninstall of every release, the manager's first (after it, nothing on either
    # cluster changes a Kueue object): every CRD and every Kueue object stays.
    kept = {}
    for local in (manager, worker):
        kept[local.name] = kueue_objects(local)
        # --wait returns once every deleted object is gone: the two aggregated ClusterRoles
        # are kept by the chart (helm.sh/resource-policy), since the clusterrole-aggregation
        # controller re-created them as soon as their members went and --wait then waited on
        # them for its whole timeout (deploy/roles/user-roles.yaml says why).
        manifest = helm(local, "get", "manifest", "kfed", "--namespace", NAMESPACE)
        released = {
            o["metadata"]["name"]
            for o in yaml.safe_load_all(manifest)
            if o and o["kind"] == "ClusterRole"
        }
        started = time.monotonic()
        helm(local, "uninstall", "kfed", "--namespace", NAMESPACE, "--wait", "--timeout", "120s")
        timings[f"{local.name}: helm uninstall --wait"] = time.monotonic() - started
        app = "kfed-manager" if local is manager else "kfed-worker-shim"
        wait_for_sync(
            lambda c=local, a=app: not pods_of(c, a),  # type: ignore[misc]
            timeout=180, what=f"{app}'s Pods gone after helm uninstall", interval=0.5,
        )  # fmt: skip
        left = cluster_role_names(local) & released
        assert left == KEPT_ROLES, f"left by helm uninstall: {sorted(left)}"
        local.kubectl("delete", "clusterrole", *sorted(KEPT_ROLES))  # docs/install.md
        helm(local, "uninstall", "kfed-crds")
        assert json.loads(helm(local, "list", "-A", "-o", "json")) == []
        assert crd_names(local) == ours
        remaining = kueue_objects(local)
        assert kept[local.name] <= remaining, sorted(kept[local.name] - remaining)
    assert any(resource == f"workloads.{KUEUE_GROUP}" for resource, *_ in kept["manager"])
    assert any(resource == f"clusterqueues.{KUEUE_GROUP}" for resource, *_ in kept["worker-1"])
    for key, seconds in timings.items():
        print(f"[real node, helm] {key}: {seconds:.1f}s")
