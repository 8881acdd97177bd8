"""deploy/ for real: kfed's image on a real kubelet in the test bed. The worker shim
(``deploy/worker/overlays/testbed``) and the manager (``deploy/manager/overlays/testbed``) are
applied with ``kubectl apply -k`` and run as Pods from the image; the manager answers
/readyz, leads (its Lease), registers its Job webhook, connects to worker-1 registered with
``kfed cluster add`` from the kubeconfig ``deploy/worker/make-kubeconfig.sh`` writes, and the
article's two jobs, submitted unchanged, federate to worker-1 and Complete there on kwok's
GPU nodes (the real nodes are tainted: no GPU Pod lands on them).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.examples import ARTICLE_JOBS, CLUSTERQUEUE_PATCH, MULTIKUEUE_CHECK, QUEUES, WORKERS
from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync
from tests.integration.realnode.conftest import RealBed

pytestmark = [pytest.mark.integration, pytest.mark.full, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
MANAGER_OVERLAY = REPO / "deploy" / "manager" / "overlays" / "testbed"
WORKER_OVERLAY = REPO / "deploy" / "worker" / "overlays" / "testbed"
MAKE_KUBECONFIG = REPO / "deploy" / "worker" / "make-kubeconfig.sh"
# The ports the testbed overlays give the manager and the shim (host network).
MANAGER_METRICS, SHIM_METRICS = 18080, 18081
NAMESPACE = "kueue-system"
LEADER_LEASE = "kfed-manager-leader"
# A worker with both GPU flavors (examples/workers/worker-2-queues.yaml): the bed's only
# worker holds both GPU models.
WORKER_QUEUES = WORKERS / "worker-2-queues.yaml"


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


def apply_and_wait_ready(
    bed: RealBed, cluster: str, overlay: Path, app: str, port: int
) -> tuple[float, dict[str, Any]]:
    """``kubectl apply -k`` the overlay, then wait for the Pod's /readyz (200) and Ready
    condition; returns the seconds from apply to /readyz and the Pod."""
    local = bed.fed.cluster(cluster)
    started = time.monotonic()
    local.kubectl("apply", "--server-side", "-k", str(overlay))

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


def test_the_manager_and_shim_run_from_the_image_and_federate_the_article(
    real_bed: RealBed, tmp_path: Path
) -> None:
    manager, worker = real_bed.fed.cluster("manager"), real_bed.fed.cluster("worker-1")
    timings = real_bed.timings

    # The shim first: the manager finds it when it connects.
    timings["worker shim: apply -> /readyz"], shim = apply_and_wait_ready(
        real_bed, "worker-1", WORKER_OVERLAY, "kfed-worker-shim", SHIM_METRICS
    )
    timings["manager: apply -> /readyz"], pod = apply_and_wait_ready(
        real_bed, "manager", MANAGER_OVERLAY, "kfed-manager", MANAGER_METRICS
    )
    for ran, cluster in ((shim, "worker-1"), (pod, "manager")):
        assert ran["spec"]["nodeName"] == real_bed.nodes[cluster].name
        statuses = ran["status"]["containerStatuses"]
        assert [s["image"] for s in statuses] == ["docker.io/library/kfed:0.1.0"]
        assert statuses[0]["restartCount"] == 0, diagnose(
            real_bed, cluster, ran["metadata"]["name"]
        )

    # It leads, and it registered its webhook where the apiserver reaches it.
    lease = get(manager, "lease", "-n", NAMESPACE, LEADER_LEASE)
    assert lease["spec"]["holderIdentity"] == pod["metadata"]["name"]
    webhook = get(manager, "mutatingwebhookconfiguration", "kfed-manager")
    assert webhook["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:19443/")

    # worker-1: its queues, and the manager's identity there from make-kubeconfig.sh.
    worker.kubectl("apply", "-f", str(WORKER_QUEUES))
    worker_kubeconfig = tmp_path / "worker-1.kubeconfig"
    made = subprocess.run(
        ["bash", str(MAKE_KUBECONFIG), "--kubeconfig", str(worker.kubeconfig),
         "--name", "worker-1", "--duration", "2h", "--output", str(worker_kubeconfig)],
        env={**os.environ, "KUBECTL": str(binaries.path_of("kubectl"))},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    # The manager: the article's queues, the MultiKueue check, worker-1 registered.
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
        f"{added.stdout}\n{added.stderr}\n{diagnose(real_bed, 'manager', 'kfed-manager')}"
    )

    # The article's jobs, unchanged: the manager's webhook marks them for MultiKueue, and they
    # complete on worker-1's kwok GPU nodes.
    submitted = time.monotonic()
    for job in ARTICLE_JOBS:
        manager.kubectl("apply", "-f", str(job))
    for name in ("light-job", "heavy-job"):
        assert get(manager, "job", "-n", "ml-jobs", name)["spec"].get("managedBy") == (
            "kueue.x-k8s.io/multikueue"
        )
    try:
        wait_for_sync(
            lambda: all(job_complete(manager, n) for n in ("light-job", "heavy-job")),
            timeout=240, what="the article's jobs Complete on the manager", interval=0.5,
        )  # fmt: skip
    except TimeoutError:
        workloads = manager.kubectl("get", "workloads", "-A", "-o", "yaml", check=False).stdout
        pytest.fail(f"{workloads}\n{diagnose(real_bed, 'manager', 'kfed-manager')}")
    timings["article's jobs: submitted -> Complete"] = time.monotonic() - submitted
    # Where their Pods ran: worker-1's scheduler events (kfed removes a finished copy, and
    # its Pods with it), on kwok's node of the GPU model each job asked for.
    gpu_model = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("gpu.model")
        for n in get(worker, "nodes")["items"]
    }
    scheduled = [
        e["message"].split()
        for e in get(worker, "events", "-n", "ml-jobs", "--field-selector", "reason=Scheduled")[
            "items"
        ]
    ]
    for name, model in (("light-job", "rtx-a1000"), ("heavy-job", "h100")):
        # "Successfully assigned ml-jobs/<pod> to <node>"
        nodes = {words[-1] for words in scheduled if words[2].startswith(f"ml-jobs/{name}-")}
        assert nodes, f"no Pod of {name} was scheduled on worker-1: {scheduled}"
        assert {gpu_model[n] for n in nodes} == {model}
    # Kueue's visibility API through kube-apiserver, served by the manager Pod as deploy/
    # registers it (visibility.yaml's APIServices, the Service's endpoint the Pod's address).
    wait_for_sync(
        lambda: apiservice_available(manager, "v1beta1.visibility.kueue.x-k8s.io"),
        timeout=120, what="the visibility APIService Available", interval=0.5,
    )  # fmt: skip
    summary = json.loads(
        manager.kubectl(
            "get", "--raw",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/gpu-cq/pendingworkloads",
        ).stdout
    )  # fmt: skip
    assert (summary["kind"], summary["items"]) == ("PendingWorkloadsSummary", [])
    for key, seconds in timings.items():
        print(f"[real node] {key}: {seconds:.1f}s")


def apiservice_available(cluster: LocalCluster, name: str) -> bool:
    conditions = (get(cluster, "apiservice", name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)
