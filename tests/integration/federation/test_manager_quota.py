"""Manager quota that follows the workers (``quotaManagement: Automated``, upstream's alpha
``MultiKueueManagerQuotaAutomation``) on real control planes: a manager ClusterQueue of its
own (``mq-cq``, one flavor, cpu and memory at 0) whose check names a MultiKueueConfig of its
own listing worker-1 and worker-2; on every worker a LocalQueue of the manager's name
pointing to a ClusterQueue of the worker's own name (summed by LocalQueue, as upstream
does), worker-3's too although the config does not list it.

The ``test_upstream_*`` tests are upstream v0.19.2's scenarios, named after them:
test/integration/multikueue/setup_test.go "Manager quota automation" and
test/e2e/multikueue/baseline/e2e_test.go "MultiKueue Manager Quota Automation".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from e2e.waiting import WaitTimeout, wait_for
from manager.api import constants as C
from manager.api.quantity import Quantity
from manager.federation.decisions import checkstatus
from manager.federation.decisions import managerquota as mq
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.emptying import empty_namespace
from tests.integration.federation.bed import Bed

pytestmark = pytest.mark.full
Obj = dict[str, Any]

NS = "mq-jobs"
FLAVOR = "mq-default"
CONFIG = "mq-workers"
CHECK = "mq-check"
MANAGER_CQ = "mq-cq"
LQ = "mq-lq"
WORKER_CQ = {w: f"mq-{w}-cq" for w in ("worker-1", "worker-2", "worker-3")}
WORKER_QUOTA = {
    "worker-1": {"cpu": "4", "memory": "8Gi"},
    "worker-2": {"cpu": "2", "memory": "4Gi"},
    "worker-3": {"cpu": "16", "memory": "64Gi"},
}
WAIT = 30.0


def cluster_queue(name: str, quota: dict[str, str], **spec: Any) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": list(quota),
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [{"name": r, "nominalQuota": q} for r, q in quota.items()],
                        }
                    ],
                }
            ],
            **spec,
        },
    }


def queue_objects(cq: str, quota: dict[str, str], **spec: Any) -> list[tuple[R.Resource, Obj]]:
    return [
        (R.NAMESPACES, {"metadata": {"name": NS}}),
        (
            R.RESOURCE_FLAVORS,
            {"apiVersion": C.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        ),
        (R.CLUSTER_QUEUES, cluster_queue(cq, quota, **spec)),
        (
            R.LOCAL_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": LQ, "namespace": NS},
                "spec": {"clusterQueue": cq},
            },
        ),
    ]


def manager_objects(quota_management: str = "Automated") -> list[tuple[R.Resource, Obj]]:
    config = {
        "apiVersion": C.API_VERSION,
        "kind": "MultiKueueConfig",
        "metadata": {"name": CONFIG},
        "spec": {"clusters": ["worker-1", "worker-2"], "quotaManagement": quota_management},
    }
    check = {
        "apiVersion": C.API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {
            "controllerName": C.MULTIKUEUE_CONTROLLER_NAME,
            "parameters": {"apiGroup": C.GROUP, "kind": "MultiKueueConfig", "name": CONFIG},
        },
    }
    strategy = {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}
    return [
        (R.MULTIKUEUE_CONFIGS, config),
        (R.ADMISSION_CHECKS, check),
        *queue_objects(MANAGER_CQ, {"cpu": "0", "memory": "0"}, **strategy),
    ]


async def create_all(api: KubeApi, objects: list[tuple[R.Resource, Obj]]) -> None:
    for res, body in objects:
        with contextlib.suppress(errors.AlreadyExists):
            await api.create(res, body, body["metadata"].get("namespace"))


async def delete_all(api: KubeApi, objects: list[tuple[R.Resource, Obj]]) -> None:
    await empty_namespace(api, NS)  # kept, emptied: see tests/integration/emptying.py
    for res, body in reversed(objects):
        if res is not R.NAMESPACES and res is not R.LOCAL_QUEUES:
            await api.delete(res, body["metadata"]["name"])


async def _on_every_cluster(fed: LocalFederation, create: bool) -> None:
    manager = await KubeApi.from_kubeconfig_file(fed.kubeconfig("manager"), name="manager")
    workers = {
        w.name: await KubeApi.from_kubeconfig_file(w.kubeconfig, name=w.name) for w in fed.workers
    }
    try:
        work = [(manager, manager_objects())] + [
            (api, queue_objects(WORKER_CQ[name], WORKER_QUOTA[name]))
            for name, api in workers.items()
        ]
        await asyncio.gather(
            *((create_all if create else delete_all)(api, objs) for api, objs in work)
        )
    finally:
        for api in (manager, *workers.values()):
            await api.close()


@pytest.fixture(scope="module")
def quota_queues(
    federation_clusters: tuple[LocalFederation, dict[str, CuttableProxy]],
) -> Iterator[None]:
    """This module's queues on every cluster, made once and removed at its end (a namespace
    takes seconds to go on each cluster)."""
    fed, _ = federation_clusters
    asyncio.run(_on_every_cluster(fed, create=True))
    try:
        yield
    finally:
        asyncio.run(_on_every_cluster(fed, create=False))


async def reset(bed: Bed) -> None:
    """Every queue as the module made it: the manager's quota 0, the workers' their own,
    worker-1's LocalQueue there, both workers in the config, Automated, none in maintenance."""
    api = bed.manager_api
    await set_maintenance(api, "worker-1", None)
    config = {"clusters": ["worker-1", "worker-2"], "quotaManagement": "Automated"}
    await api.patch(R.MULTIKUEUE_CONFIGS, CONFIG, {"spec": config})
    for res, body in manager_objects():
        if res is R.CLUSTER_QUEUES:
            await api.patch(res, MANAGER_CQ, {"spec": body["spec"]})
    for worker, wapi in bed.worker_apis.items():
        await set_worker_quota(wapi, worker, **WORKER_QUOTA[worker])
        await create_all(wapi, queue_objects(WORKER_CQ[worker], WORKER_QUOTA[worker]))


@pytest.fixture
async def quota_bed(bed: Bed, quota_queues: None) -> AsyncIterator[Bed]:
    """The bed with this module's queues as made; worker-1 out of maintenance afterwards."""
    await reset(bed)
    try:
        yield bed
    finally:
        await bed.stop_all()
        await set_maintenance(bed.manager_api, "worker-1", None)


async def set_maintenance(api: KubeApi, worker: str, mode: str | None) -> None:
    patch = {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: mode}}}
    await api.patch(R.MULTIKUEUE_CLUSTERS, worker, patch)


async def set_worker_quota(api: KubeApi, worker: str, **quota: str) -> None:
    body = cluster_queue(WORKER_CQ[worker], quota)
    await api.patch(R.CLUSTER_QUEUES, WORKER_CQ[worker], {"spec": body["spec"]})


async def set_clusters(api: KubeApi, *clusters: str) -> None:
    await api.patch(R.MULTIKUEUE_CONFIGS, CONFIG, {"spec": {"clusters": list(clusters)}})


def nominal(cq: Obj) -> dict[str, Quantity]:
    ((flavor,),) = [g["flavors"] for g in cq["spec"]["resourceGroups"]]
    return {r["name"]: Quantity.parse(r["nominalQuota"]) for r in flavor["resources"]}


def condition(cq: Obj) -> tuple[str, str, str] | None:
    for c in (cq.get("status") or {}).get("conditions") or []:
        if c["type"] == mq.CONDITION:
            return c["status"], c["reason"], c["message"]
    return None


async def quota_becomes(api: KubeApi, what: str, **quota: str) -> Obj:
    """Wait until the manager ClusterQueue's quota is ``quota`` and it says it is automated."""
    wanted = {r: Quantity.parse(q) for r, q in quota.items()}

    async def there() -> Obj | None:
        cq = await api.get(R.CLUSTER_QUEUES, MANAGER_CQ)
        automated = condition(cq) == ("True", mq.REASON_AUTOMATED, mq.MESSAGE_AUTOMATED)
        return cq if automated and nominal(cq) == wanted else None

    found = await wait_for(there, timeout=WAIT, what=f"{what}: manager quota {quota}")
    assert found is not None
    return found


async def test_upstream_should_automatically_aggregate_quotas_from_active_worker_cluster_queues(
    quota_bed: Bed,
) -> None:
    """Sum on start: 4+2 cpu, 8Gi+4Gi memory, in the manager ClusterQueue's one flavor, with
    the condition True; worker-3's queue is not counted (the config does not list it), and
    the rest of the spec is as it was."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    cq = await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"][0]["name"] == FLAVOR
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": CHECK}]}
    (cond,) = [c for c in cq["status"]["conditions"] if c["type"] == mq.CONDITION]
    assert cond["observedGeneration"] == cq["metadata"]["generation"]


async def test_upstream_manager_quota_follows_a_worker_cluster_queue_quota_change(
    quota_bed: Bed,
) -> None:
    """Upstream's "Should update manager ClusterQueue quota when worker ClusterQueue quota
    changes": a worker's quota grows, then drops; the manager follows each time."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    await set_worker_quota(bed.worker_apis["worker-1"], "worker-1", cpu="10", memory="8Gi")
    await quota_becomes(api, "worker-1 grew", cpu="12", memory="12Gi")
    await set_worker_quota(bed.worker_apis["worker-1"], "worker-1", cpu="1", memory="1Gi")
    await quota_becomes(api, "worker-1 shrank", cpu="3", memory="5Gi")


async def test_upstream_manager_quota_drops_when_a_worker_local_queue_is_removed(
    quota_bed: Bed,
) -> None:
    """Upstream's "Should update manager ClusterQueue quota when worker LocalQueue is
    removed"."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    await bed.worker_apis["worker-1"].delete(R.LOCAL_QUEUES, LQ, NS)
    await quota_becomes(api, "worker-1's LocalQueue deleted", cpu="2", memory="4Gi")


async def test_a_worker_removed_from_the_config_takes_its_share_away_and_joining_brings_it(
    quota_bed: Bed,
) -> None:
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    await set_clusters(api, "worker-2")
    await quota_becomes(api, "worker-1 removed", cpu="2", memory="4Gi")
    await set_clusters(api, "worker-2", "worker-3")
    await quota_becomes(api, "worker-3 joined", cpu="18", memory="68Gi")


async def test_upstream_inactive_workers_are_ignored_until_they_come_back(quota_bed: Bed) -> None:
    """Upstream's rule for a worker that is not connected: it gives nothing (unit case
    "unrelated CQs and inactive workers are ignored"); back, it gives its share again."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    bed.proxies["worker-1"].cut()
    await quota_becomes(api, "worker-1 lost", cpu="2", memory="4Gi")
    bed.proxies["worker-1"].heal()
    await quota_becomes(api, "worker-1 back", cpu="6", memory="12Gi")


async def test_a_cordoned_worker_gives_only_what_runs_there(quota_bed: Bed) -> None:
    """kfed's maintenance (upstream has none): cordoned, idle worker-1 gives nothing (no new
    work may go there); uncordoned, its whole quota again."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    await set_maintenance(api, "worker-1", C.MAINTENANCE_CORDON)
    await quota_becomes(api, "worker-1 cordoned", cpu="2", memory="4Gi")
    await set_maintenance(api, "worker-1", None)
    await quota_becomes(api, "worker-1 uncordoned", cpu="6", memory="12Gi")


async def test_bad_input_gets_a_readable_condition_and_changes_nothing(quota_bed: Bed) -> None:
    """Two flavors on the manager ClusterQueue, a worker quota on a resource the manager
    does not cover, and ``Manual``: each says so in the condition, the quota stays."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_manager()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")

    async def condition_is(reason: str, message: str) -> Obj | None:
        cq = await api.get(R.CLUSTER_QUEUES, MANAGER_CQ)
        return cq if condition(cq) == ("False", reason, message) else None

    await set_worker_quota(bed.worker_apis["worker-2"], "worker-2", cpu="2", pods="10")
    missing = mq.MESSAGE_MISSING_RESOURCES.format("pods")
    cq = await wait_for(
        lambda: condition_is(mq.REASON_UNSUPPORTED, missing), timeout=WAIT, what="pods refused"
    )
    assert cq is not None
    assert nominal(cq) == {"cpu": Quantity.parse(6), "memory": Quantity.parse("12Gi")}
    await set_worker_quota(bed.worker_apis["worker-2"], "worker-2", cpu="2", memory="4Gi")
    await quota_becomes(api, "pods gone", cpu="6", memory="12Gi")

    await api.patch(R.MULTIKUEUE_CONFIGS, CONFIG, {"spec": {"quotaManagement": "Manual"}})
    await wait_for(
        lambda: condition_is(mq.REASON_NOT_REQUESTED, mq.MESSAGE_NOT_REQUESTED),
        timeout=WAIT,
        what="NotRequested",
    )
    await set_worker_quota(bed.worker_apis["worker-1"], "worker-1", cpu="9", memory="8Gi")
    await api.patch(R.MULTIKUEUE_CONFIGS, CONFIG, {"spec": {"quotaManagement": "Automated"}})
    await quota_becomes(api, "Automated again", cpu="11", memory="12Gi")

    two = cluster_queue(MANAGER_CQ, {"cpu": "1", "memory": "1Gi"})["spec"]["resourceGroups"]
    two[0]["flavors"].append({**two[0]["flavors"][0], "name": "mq-other"})
    await api.patch(R.CLUSTER_QUEUES, MANAGER_CQ, {"spec": {"resourceGroups": two}})
    cq = await wait_for(
        lambda: condition_is(mq.REASON_UNSUPPORTED, mq.MESSAGE_ONE_FLAVOR),
        timeout=WAIT,
        what="two flavors refused",
    )
    assert cq is not None
    assert cq["spec"]["resourceGroups"] == two


def job(name: str, *, cpu: str, run_ms: int) -> Obj:
    """A queued Job of one pod asking ``cpu`` and 1Gi; kwok ends its pod after ``run_ms``."""
    delay = {"pod-complete.stage.kwok.x-k8s.io/delay": str(run_ms)}
    container = {
        "name": "c",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: LQ}},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": delay},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


async def placed(api: KubeApi) -> str | None:
    """The worker the module's one workload is placed on (its check Ready)."""
    for wl in (await api.list(R.WORKLOADS, NS))["items"]:
        state, _ = checkstatus.check_state(wl, CHECK)
        if state == "Ready":
            return str((wl.get("status") or {}).get("clusterName") or "")
    return None


async def placed_on(api: KubeApi, job_name: str) -> str:
    """Wait until the job's workload is placed; the worker. On a timeout the job's and the
    workloads' status say why."""
    try:
        worker = await wait_for(lambda: placed(api), timeout=60, what=f"{job_name} placed")
    except WaitTimeout as err:
        job_obj = await api.get(R.JOBS, job_name, NS)
        wls = [
            (w["metadata"]["name"], w.get("status"))
            for w in (await api.list(R.WORKLOADS, NS))["items"]
        ]
        cq = await api.get(R.CLUSTER_QUEUES, MANAGER_CQ)
        spec = job_obj["spec"]
        raise AssertionError(
            f"{err}: job suspend={spec.get('suspend')} managedBy={spec.get('managedBy')}; "
            f"workloads {wls}; ClusterQueue status {cq.get('status')}"
        ) from err
    assert worker is not None
    return worker


async def released(bed: Bed) -> None:
    """Leave worker-1's ClusterQueue reserving nothing, as the module found it (a cordoned
    worker gives what it has reserved: the other tests read it)."""

    async def nothing_reserved() -> bool:
        wcq = await bed.worker_apis["worker-1"].get(R.CLUSTER_QUEUES, WORKER_CQ["worker-1"])
        return all(not amount for amount in mq.reserved_of(wcq).values())

    await wait_for(nothing_reserved, timeout=60, what="worker-1's quota released")


async def test_a_job_admitted_under_the_automated_quota_runs(quota_bed: Bed) -> None:
    """The manager's quota is written as 0: without the automation nothing is admitted. A
    job of 3 cpu is admitted under the sum (6), placed on worker-1 (4 cpu; worker-2 has 2)
    and runs to the end."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_federation()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    await api.create(R.JOBS, job("mq-job", cpu="3", run_ms=1000), NS)
    worker = await placed_on(api, "mq-job")
    assert worker == "worker-1", "3 cpu fit worker-1's 4, not worker-2's 2"

    async def complete() -> bool:
        got = await api.get(R.JOBS, "mq-job", NS)
        conds = (got.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)

    await wait_for(complete, timeout=90, what="mq-job complete on the manager")
    await api.delete(R.JOBS, "mq-job", NS)
    await released(bed)


async def test_a_cordoned_worker_keeps_the_share_of_the_work_running_there(
    quota_bed: Bed,
) -> None:
    """Cordoned while a job of 3 cpu and 1Gi runs there, worker-1 gives what it has reserved
    (3 cpu, 1Gi: 5 cpu and 5Gi in all), not its whole quota (no new work may go there) nor
    nothing (the running job would count against worker-2's share); the job deleted, its
    share goes; uncordoned, the whole quota comes back."""
    bed = quota_bed
    api = bed.manager_api
    await bed.start_federation()
    await quota_becomes(api, "on start", cpu="6", memory="12Gi")
    await api.create(R.JOBS, job("mq-long", cpu="3", run_ms=600_000), NS)
    try:
        worker = await placed_on(api, "mq-long")
        assert worker == "worker-1"
        await set_maintenance(api, "worker-1", C.MAINTENANCE_CORDON)
        await quota_becomes(api, "worker-1 cordoned, running 3 cpu", cpu="5", memory="5Gi")
    finally:
        await api.delete(R.JOBS, "mq-long", NS)
    await quota_becomes(api, "the job gone from cordoned worker-1", cpu="2", memory="4Gi")
    await set_maintenance(api, "worker-1", None)
    await quota_becomes(api, "worker-1 uncordoned", cpu="6", memory="12Gi")
    await released(bed)
