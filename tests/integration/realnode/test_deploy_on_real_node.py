"""deploy/ for real: kfed's image on a real kubelet in the test bed. ``deploy/crds``, then the
worker shim (``deploy/worker/overlays/testbed``) and the manager
(``deploy/manager/overlays/testbed``) are applied with ``kubectl apply -k`` and run as Pods from
the image; the manager answers
/readyz, leads (its Lease), registers its Job webhook, connects to worker-1 registered with
``kfed cluster add`` from the kubeconfig ``deploy/worker/make-kubeconfig.sh`` writes, and the
article's two jobs, submitted unchanged, federate to worker-1 and Complete there on kwok's
GPU nodes (the real nodes are tainted: no GPU Pod lands on them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync
from tests.integration.realnode.conftest import RealBed
from tests.integration.realnode.federating import (
    MANAGER_METRICS,
    SHIM_METRICS,
    apiservice_available,
    crds_established,
    diagnose,
    get,
    install_and_wait_ready,
    leader_lease,
    register_worker_1,
    run_the_article,
    scheduled_pods,
)

pytestmark = [pytest.mark.integration, pytest.mark.full, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
MANAGER_OVERLAY = REPO / "deploy" / "manager" / "overlays" / "testbed"
WORKER_OVERLAY = REPO / "deploy" / "worker" / "overlays" / "testbed"
CRDS = REPO / "deploy" / "crds"


def apply_k(cluster: LocalCluster, overlay: Path) -> None:
    cluster.kubectl("apply", "--server-side", "-k", str(overlay))


def test_the_manager_and_shim_run_from_the_image_and_federate_the_article(
    real_bed: RealBed, tmp_path: Path
) -> None:
    manager, worker = real_bed.fed.cluster("manager"), real_bed.fed.cluster("worker-1")
    timings = real_bed.timings

    # The CRDs on their own, first (the overlays leave them out); then the shim: the manager
    # finds it when it connects.
    for local in (manager, worker):
        local.kubectl("apply", "--server-side", "-k", str(CRDS))
        crds_established(local)
    timings["worker shim: apply -> /readyz"], shim = install_and_wait_ready(
        real_bed, "worker-1", lambda: apply_k(worker, WORKER_OVERLAY), "kfed-worker-shim",
        SHIM_METRICS,
    )  # fmt: skip
    timings["manager: apply -> /readyz"], pod = install_and_wait_ready(
        real_bed, "manager", lambda: apply_k(manager, MANAGER_OVERLAY), "kfed-manager",
        MANAGER_METRICS,
    )  # fmt: skip
    for ran, cluster in ((shim, "worker-1"), (pod, "manager")):
        assert ran["spec"]["nodeName"] == real_bed.nodes[cluster].name
        statuses = ran["status"]["containerStatuses"]
        assert [s["image"] for s in statuses] == ["docker.io/library/kfed:0.1.0"]
        assert statuses[0]["restartCount"] == 0, diagnose(
            real_bed, cluster, ran["metadata"]["name"]
        )

    # It leads, and it registered its webhook where the apiserver reaches it.
    leader_lease(real_bed, pod["metadata"]["name"])
    webhook = get(manager, "mutatingwebhookconfiguration", "kfed-manager")
    assert webhook["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:19443/")

    register_worker_1(real_bed, tmp_path)
    timings["article's jobs: submitted -> Complete"] = run_the_article(real_bed)
    # Where their Pods ran: worker-1's scheduler events (kfed removes a finished copy, and
    # its Pods with it), on kwok's node of the GPU model each job asked for.
    gpu_model = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("gpu.model")
        for n in get(worker, "nodes")["items"]
    }
    for name, model in (("light-job", "rtx-a1000"), ("heavy-job", "h100")):
        nodes = set(scheduled_pods(worker, name).values())
        assert nodes, f"no Pod of {name} was scheduled on worker-1"
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
