"""The manager side of a federation moves from upstream Kueue to kfed and back, as
docs/migrate.md says, on the interop bed's upstream MultiKueue manager (worker-2, whose worker
is the kfed worker, worker-3): upstream runs a job; its federated ClusterQueue is held
(``stopPolicy: Hold``) and nothing is in flight; upstream's controller stops (its webhooks with
it); ``kfed crds --check-cluster`` says to keep upstream's CRDs; kfed's manager starts on the
same cluster with upstream's origin and reads upstream's registration (AdmissionCheck,
MultiKueueConfig, MultiKueueCluster, Secret) as it is; the queue is released and kfed places
the next job on the same worker; then kfed's manager stops, upstream's starts again, and runs
the last job, once kfed's manager Lease is gone from the worker (kfed's shim would fence
upstream's copies under a silent Lease of their origin). Every job runs once, each handed
over with nothing in flight."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from e2e.local import upstream_kueue
from e2e.waiting import WaitTimeout, wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.helpers import condition
from tests.integration.federation import article
from tests.integration.federation.bed import FAST, Bed
from tests.integration.interop.conftest import (
    KFED_WORKER,
    KFED_WORKER_ON_KUEUE,
    KUEUE_MANAGER,
    KUEUE_ORIGIN,
    InteropClusters,
)
from tests.integration.interop.test_upstream_manager_kfed_worker import complete, workload_of

pytestmark = pytest.mark.full
NS = article.NS
KFED = str(Path(sys.executable).with_name("kfed"))


async def kubectl(interop: InteropClusters, *args: str, on: str = KUEUE_MANAGER) -> str:
    """A command of docs/migrate.md on the manager's cluster, or ``on`` another (in a thread:
    the shim and the manager run on this event loop); its output."""
    done = await asyncio.to_thread(interop.fed.kubectl, on, *args)
    return done.stdout


async def hold(interop: InteropClusters, policy: str) -> None:
    await kubectl(
        interop, "patch", "clusterqueue", "gpu-cq", "--type=merge",
        "-p", f'{{"spec":{{"stopPolicy":"{policy}"}}}}',
    )  # fmt: skip


DIAGNOSE: list[Callable[[], Awaitable[str]]] = []
"""What a failed run says besides the Workload (the worker's copies, upstream's log)."""


async def run_to_completion(api: KubeApi, name: str, by: str) -> dict[str, object]:
    """Submit the article's light job as ``name`` on the manager; its Workload once the Job
    completed there."""
    await api.create(R.JOBS, article.seed_job("02-light-job.yaml", metadata={"name": name}), NS)
    try:
        await wait_for(
            lambda: complete(api, name), timeout=120, what=f"{name} Complete, run through {by}"
        )
    except WaitTimeout:
        status = (await workload_of(api, name)).get("status") or {}
        said = [await diagnose() for diagnose in DIAGNOSE]
        raise AssertionError(
            f"{name} not Complete through {by}; its Workload: {status}\n" + "\n".join(said)
        ) from None
    return await workload_of(api, name)


async def nothing_in_flight(api: KubeApi) -> bool:
    """Every Workload of the manager's namespace finished or never admitted."""
    for wl in (await api.list(R.WORKLOADS, NS))["items"]:
        admitted = condition(wl, "QuotaReserved")
        finished = condition(wl, "Finished")
        held = admitted is not None and admitted["status"] == "True"
        if held and not (finished is not None and finished["status"] == "True"):
            return False
    return True


async def restart_upstream(interop: InteropClusters) -> None:
    """Upstream's controller again. Started from this (the event loop's) thread: the process
    dies with the thread that started it, and a worker thread of ``to_thread`` ends with the
    test's loop, which killed it under the bed's next test. Only the wait is in a thread."""
    cluster = interop.fed.cluster(KUEUE_MANAGER)
    restarted = upstream_kueue.start(cluster, origin=KUEUE_ORIGIN, gc_interval="5s")
    interop.kueue[KUEUE_MANAGER] = restarted
    await asyncio.to_thread(restarted.wait_ready)


async def test_the_manager_side_moves_from_upstream_kueue_to_kfed_and_back(
    interop: InteropClusters, kueue_manager: KubeApi
) -> None:
    fed = interop.fed
    worker_api = await KubeApi.from_kubeconfig_file(fed.kubeconfig(KFED_WORKER), name=KFED_WORKER)
    # kfed's manager where upstream's ran: upstream's origin, so the copies already on the
    # workers stay recognisably this manager's.
    bed = Bed(
        fed, {}, kueue_manager, {KFED_WORKER: worker_api},
        settings=dataclasses.replace(FAST, origin=KUEUE_ORIGIN),
    )  # fmt: skip
    await bed.start_shim(KFED_WORKER)

    async def copies() -> str:
        items = (await worker_api.list(R.WORKLOADS, NS))["items"]
        return "worker copies: " + repr(
            [
                (
                    w["metadata"]["name"],
                    w["metadata"].get("labels"),
                    w.get("spec", {}).get("active"),
                    [
                        (c["type"], c["status"], c.get("reason"))
                        for c in (w.get("status") or {}).get("conditions", [])
                    ],
                )
                for w in items
            ]
        )

    async def upstream_log() -> str:
        running = interop.kueue.get(KUEUE_MANAGER)
        proc = running.cluster.processes.get("kueue") if running else None
        return "upstream's log:\n" + (proc.log_tail(40) if proc else "(not running)")

    DIAGNOSE[:] = [copies, upstream_log]
    try:
        before = await run_to_completion(kueue_manager, "m-before", "upstream's manager")
        assert ws.status_of(before)["clusterName"] == KFED_WORKER_ON_KUEUE

        # Before: every object is stored as v1beta2, which kfed reads without a conversion.
        for crd in ("workloads", "clusterqueues", "localqueues", "multikueueclusters"):
            stored = await kubectl(
                interop, "get", "crd", f"{crd}.kueue.x-k8s.io",
                "-o", "jsonpath={.status.storedVersions}",
            )  # fmt: skip
            assert stored == '["v1beta2"]', (crd, stored)

        # The handover: hold, nothing in flight, upstream's controller (and its fail-closed
        # webhooks) gone, its CRDs kept.
        await hold(interop, "Hold")
        await wait_for(lambda: nothing_in_flight(kueue_manager), timeout=60, what="drained")
        await asyncio.to_thread(interop.kueue.pop(KUEUE_MANAGER).stop)
        check = await asyncio.to_thread(
            subprocess.run,
            [KFED, "crds", "--check-cluster", "--kubeconfig", str(fed.kubeconfig(KUEUE_MANAGER))],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert check.returncode == 1 and "Keep the installed CRDs" in check.stderr, check.stderr

        await bed.start_manager(identity="migrated-manager")
        await hold(interop, "None")
        during = await run_to_completion(kueue_manager, "m-kfed", "kfed's manager")
        assert ws.status_of(during)["clusterName"] == KFED_WORKER_ON_KUEUE
        job = await kueue_manager.get(R.JOBS, "m-kfed", NS)
        assert job["spec"]["managedBy"] == C.MULTIKUEUE_CONTROLLER_NAME, "kfed's webhook"

        # And back: kfed's manager (and its webhook) stop, upstream's starts again.
        await hold(interop, "Hold")
        await wait_for(lambda: nothing_in_flight(kueue_manager), timeout=60, what="drained")
        await bed.stop("manager")
        await kubectl(interop, "delete", "mutatingwebhookconfiguration", "kfed-manager")
        # kfed's shim fences the copies of an origin whose manager Lease is silent or
        # released; upstream's manager renews none, so the Lease kfed's manager left on the
        # worker goes, or every copy upstream sends there under that origin is fenced.
        lease = f"kfed-manager-{KUEUE_ORIGIN}"
        await kubectl(interop, "-n", "kueue-system", "delete", "lease", lease, on=KFED_WORKER)
        await bed.stop("webhook")  # its configuration is gone already; the worker's shim stays
        bed.webhook = None
        await restart_upstream(interop)
        await hold(interop, "None")
        after = await run_to_completion(kueue_manager, "m-after", "upstream's manager again")
        assert ws.status_of(after)["clusterName"] == KFED_WORKER_ON_KUEUE
    finally:
        await bed.stop_all()
        if KUEUE_MANAGER not in interop.kueue:  # the bed's other tests need it
            await restart_upstream(interop)
        await hold(interop, "None")
        for name in ("m-before", "m-kfed", "m-after"):
            await kubectl(
                interop, "delete", "job", name, "-n", NS, "--ignore-not-found", "--wait=false"
            )
        await worker_api.close()
