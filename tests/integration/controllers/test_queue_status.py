"""Queue status written back when only its ``Active`` condition changes (issue "Federation
engine", defect "status writes lost"): before, the writer edited the informer cache's own
condition in place, compared the cache with itself and never sent the change."""

from __future__ import annotations

import asyncio

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import conditions
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.tasks import stop_tasks
from tests.integration.cli.objects import multikueue_check
from tests.integration.controllers.conftest import StartController

pytestmark = pytest.mark.full


async def active_condition(api: KubeApi, name: str) -> dict[str, str] | None:
    cq = await api.get(R.CLUSTER_QUEUES, name)
    found = conditions.find((cq.get("status") or {}).get("conditions"), C.ACTIVE)
    return dict(found) if found else None


@pytest.mark.parametrize("role", ["manager", "worker"])
async def test_a_cluster_queue_becomes_active_once_its_missing_flavor_exists(
    api: KubeApi, unique: str, role: str
) -> None:
    flavor, name = f"later-{unique}", f"waits-{unique}"
    controller = ClusterController(api, ControllerSettings(status_period=0.2, role=role))
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        await api.create(
            R.CLUSTER_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 1}]}
                            ],
                        }
                    ],
                },
            },
        )

        async def inactive() -> dict[str, str] | None:
            found = await active_condition(api, name)
            return found if found and found["status"] == "False" else None

        said = await wait_for(inactive, timeout=30, what=f"{name} Active=False")
        assert said is not None and flavor in said["message"], said
        await api.create(
            R.RESOURCE_FLAVORS,
            {"apiVersion": C.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        )

        async def active() -> bool:
            found = await active_condition(api, name)
            return found is not None and found["status"] == "True"

        await wait_for(active, timeout=30, what=f"{name} Active=True once {flavor} exists")
    finally:
        await stop_tasks([task])
        await api.delete(R.CLUSTER_QUEUES, name)
        await api.delete(R.RESOURCE_FLAVORS, flavor)


async def test_upstream_a_multikueue_check_per_flavor_or_twice_makes_the_queue_inactive(
    api: KubeApi, unique: str, start_controller: StartController
) -> None:
    """Upstream's ClusterQueue rules for MultiKueue checks, with its reasons and messages: a
    MultiKueue check limited to some flavors (``onFlavors``), or two MultiKueue checks, keep
    the ClusterQueue inactive (half of its workloads would otherwise run on the manager
    cluster itself); fixed, it becomes active. Before, kfed ignored ``onFlavors``."""
    await start_controller()
    flavor, name = f"f-{unique}", f"mk-{unique}"
    checks = [f"mk1-{unique}", f"mk2-{unique}"]
    await api.create(
        R.RESOURCE_FLAVORS,
        {"apiVersion": C.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor}},
    )
    for check in checks:
        await api.create(R.ADMISSION_CHECKS, multikueue_check(check, check))
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 1}]}],
        }
    ]
    strategy = {"admissionChecks": [{"name": checks[0], "onFlavors": [flavor]}]}
    await api.create(
        R.CLUSTER_QUEUES,
        {
            "apiVersion": C.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"resourceGroups": groups, "admissionChecksStrategy": strategy},
        },
    )
    try:

        async def says(reason: str) -> dict[str, str] | None:
            found = await active_condition(api, name)
            return found if found and found.get("reason") == reason else None

        per_flavor = await wait_for(
            lambda: says(C.REASON_MULTIKUEUE_CHECK_PER_FLAVOR), timeout=30, what="per flavor"
        )
        assert per_flavor is not None and per_flavor["status"] == "False"
        assert per_flavor["message"] == (
            "Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per flavor, "
            f"found: {checks[0]}."
        )
        both = {"admissionChecks": [{"name": c} for c in checks]}
        await api.patch(R.CLUSTER_QUEUES, name, {"spec": {"admissionChecksStrategy": both}})
        twice = await wait_for(
            lambda: says(C.REASON_MULTIPLE_MULTIKUEUE_CHECKS), timeout=30, what="two checks"
        )
        assert twice is not None and f"found: {checks[0]},{checks[1]}." in twice["message"]
        one = {"admissionChecks": [{"name": checks[0]}]}
        await api.patch(R.CLUSTER_QUEUES, name, {"spec": {"admissionChecksStrategy": one}})

        async def active() -> bool:
            found = await active_condition(api, name)
            return found is not None and found["status"] == "True"

        await wait_for(active, timeout=30, what=f"{name} Active once fixed")
    finally:
        await api.delete(R.CLUSTER_QUEUES, name)
        for check in checks:
            await api.delete(R.ADMISSION_CHECKS, check)
        await api.delete(R.RESOURCE_FLAVORS, flavor)
