"""What the real-node tests do to a bed once kfed runs on it, however it was installed
(``kubectl apply -k`` of deploy/, or the Helm chart): wait for a kfed Pod to answer /readyz,
register worker-1 with the article's queues, run the article's jobs to completion, and say
what went wrong when something did."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.examples import ARTICLE_JOBS, CLUSTERQUEUE_PATCH, MULTIKUEUE_CHECK, QUEUES, WORKERS
from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync
from tests.integration.realnode.conftest import RealBed

REPO = Path(__file__).resolve().parents[3]
MAKE_KUBECONFIG = REPO / "deploy" / "worker" / "make-kubeconfig.sh"
# The ports the testbed overlays and values give the manager and the shim (host network).
MANAGER_METRICS, SHIM_METRICS = 18080, 18081
NAMESPACE = "kueue-system"
LEADER_LEASE = "kfed-manager-leader"
# A worker with both GPU flavors (examples/workers/worker-2-queues.yaml): the bed's only
# worker holds both GPU models.
WORKER_QUEUES = WORKERS / "worker-2-queues.yaml"
ARTICLE_JOB_NAMES = ("light-job", "heavy-job")


def readyz(port: int) -> int | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return result


def pod_ready(cluster: LocalCluster, app: str) -> dict[str, Any] | None:
    pods = get(cluster, "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={app}")["items"]
    for pod in pods:
        conditions = pod.get("status", {}).get("conditions", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            found: dict[str, Any] = pod
            return found
    return None


def install_and_wait_ready(
    bed: RealBed, cluster: str, install: Callable[[], object], app: str, port: int
) -> tuple[float, dict[str, Any]]:
    """Run ``install``, then wait for the Pod's /readyz (200) and Ready condition; returns the
    seconds from the install's start to /readyz, and the Pod."""
    local = bed.fed.cluster(cluster)
    started = time.monotonic()
    install()

    def answered() -> bool:
        if readyz(port) == 200:
            return True
        for role in ("kubelet", "containerd"):
            assert local.processes[role].alive, local.processes[role].log_tail()
        return False

    try:
        wait_for_sync(
            answered, timeout=240, what=f"{app} /readyz on 127.0.0.1:{port}", interval=0.2
        )
    except TimeoutError:
        pytest.fail(f"{app} never answered /readyz 200:\n{diagnose(bed, cluster, app)}")
    seconds = time.monotonic() - started
    pod = wait_for_sync(lambda: pod_ready(local, app), timeout=60, what=f"{app} Pod Ready")
    return seconds, pod


def diagnose(bed: RealBed, cluster: str, app: str) -> str:
    local = bed.fed.cluster(cluster)
    pods = local.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide", check=False).stdout
    events = local.kubectl("get", "events", "-n", NAMESPACE, check=False).stdout
    return f"{pods}\n{events}\n{bed.nodes[cluster].pod_logs(NAMESPACE, app)}"


def leader_lease(bed: RealBed, holder: str, *, timeout: float = 60.0) -> dict[str, Any]:
    """The manager's leader Lease once it names ``holder``. Waited for: on a busy machine the
    first write of the Lease was seen to land after the test read it; if it never comes, the
    failure shows every Lease of the cluster and the manager's log."""
    local = bed.fed.cluster("manager")

    def named() -> dict[str, Any] | None:
        found = local.kubectl(
            "get", "lease", "-n", NAMESPACE, LEADER_LEASE, "-o", "json", check=False
        )
        if found.returncode != 0:
            return None
        lease: dict[str, Any] = json.loads(found.stdout)
        return lease if lease["spec"].get("holderIdentity") == holder else None

    try:
        lease: dict[str, Any] = wait_for_sync(
            named, timeout=timeout, interval=0.5, what=f"Lease {LEADER_LEASE} held by {holder}"
        )
    except TimeoutError:
        leases = local.kubectl("get", "lease", "-A", "-o", "wide", check=False).stdout
        pytest.fail(
            f"{LEADER_LEASE} never named {holder}:\n{leases}\n"
            f"{diagnose(bed, 'manager', 'kfed-manager')}"
        )
    return lease


def kfed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("kfed")), *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def job_complete(cluster: LocalCluster, name: str) -> bool:
    job = get(cluster, "job", "-n", "ml-jobs", name)
    conditions = job.get("status", {}).get("conditions", [])
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


def crds_established(cluster: LocalCluster, group: str = "kueue.x-k8s.io") -> None:
    """Wait until every CRD of ``group`` is Established (``kubectl wait`` errors on a CRD
    created a moment ago, whose status has no conditions yet)."""

    def established() -> bool:
        crds = [c for c in get(cluster, "crd")["items"] if c["spec"]["group"] == group]
        return bool(crds) and all(
            any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
            for crd in crds
        )

    wait_for_sync(established, timeout=120, what=f"{group} CRDs Established", interval=0.5)


def register_worker_1(bed: RealBed, tmp_path: Path) -> None:
    """worker-1's queues, the manager's identity there from make-kubeconfig.sh; on the
    manager the article's queues, the MultiKueue check, and worker-1 added with kfed."""
    manager, worker = bed.fed.cluster("manager"), bed.fed.cluster("worker-1")
    worker.kubectl("apply", "-f", str(WORKER_QUEUES))
    worker_kubeconfig = tmp_path / "worker-1.kubeconfig"
    made = subprocess.run(
        ["bash", str(MAKE_KUBECONFIG), "--kubeconfig", str(worker.kubeconfig),
         "--name", "worker-1", "--duration", "2h", "--output", str(worker_kubeconfig)],
        env={**os.environ, "KUBECTL": str(binaries.path_of("kubectl"))},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    manager.kubectl("apply", "-f", str(QUEUES))
    check = [
        d for d in yaml.safe_load_all(MULTIKUEUE_CHECK.read_text()) if d["kind"] == "AdmissionCheck"
    ]
    manager.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(check))
    manager.kubectl(
        "patch", "clusterqueue", "gpu-cq", "--type=merge", "--patch-file", str(CLUSTERQUEUE_PATCH)
    )
    on_manager = ("--kubeconfig", str(manager.kubeconfig))
    added = kfed("cluster", "add", "worker-1", *on_manager, "--kubeconfig-file",
                 str(worker_kubeconfig), "--wait", "--timeout", "120s")  # fmt: skip
    assert added.returncode == 0, (
        f"{added.stdout}\n{added.stderr}\n{diagnose(bed, 'manager', 'kfed-manager')}"
    )


def run_the_article(bed: RealBed) -> float:
    """The article's jobs, unchanged: the manager's webhook marks them for MultiKueue, and
    they complete on worker-1's kwok GPU nodes. Returns the seconds to Complete."""
    manager = bed.fed.cluster("manager")
    submitted = time.monotonic()
    for job in ARTICLE_JOBS:
        manager.kubectl("apply", "-f", str(job))
    for name in ARTICLE_JOB_NAMES:
        assert get(manager, "job", "-n", "ml-jobs", name)["spec"].get("managedBy") == (
            "kueue.x-k8s.io/multikueue"
        )
    wait_for_jobs(bed, ARTICLE_JOB_NAMES, what="the article's jobs")
    return time.monotonic() - submitted


def wait_for_jobs(bed: RealBed, names: tuple[str, ...], *, what: str) -> None:
    manager = bed.fed.cluster("manager")
    try:
        wait_for_sync(
            lambda: all(job_complete(manager, n) for n in names),
            timeout=240, what=f"{what} Complete on the manager", interval=0.5,
        )  # fmt: skip
    except TimeoutError:
        workloads = manager.kubectl("get", "workloads", "-A", "-o", "yaml", check=False).stdout
        pytest.fail(f"{workloads}\n{diagnose(bed, 'manager', 'kfed-manager')}")


def scheduled_pods(worker: LocalCluster, job: str) -> dict[str, str]:
    """Pod name -> node of every Pod of ``job`` worker-1's scheduler placed, from its events
    (kfed removes a finished copy, and its Pods with it)."""
    events = get(worker, "events", "-n", "ml-jobs", "--field-selector", "reason=Scheduled")
    placed = {}
    for event in events["items"]:
        # "Successfully assigned ml-jobs/<pod> to <node>"
        words = event["message"].split()
        if words[2].startswith(f"ml-jobs/{job}-"):
            placed[words[2]] = words[-1]
    return placed


def apiservice_available(cluster: LocalCluster, name: str) -> bool:
    conditions = (get(cluster, "apiservice", name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)
