"""Device claims charged to quota (docs/dra.md) on a real control plane (kube-apiserver 1.34
serves resource.k8s.io/v1): a Job whose pod claims 2 devices of a mapped DeviceClass from a
ResourceClaimTemplate holds 2 of the mapped resource; a second one waits for them; a class
that is not mapped keeps its Job out, with upstream's reason, holding nothing; and the
charge is the one recorded when the Workload was made, whatever the template says later."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.api import dra, draannotations
from manager.controllers import workloadstatus as ws
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.tasks import stop_tasks
from tests import builders as b
from tests.integration.controllers.helpers import condition, workload_of

pytestmark = pytest.mark.full

GPU = "example.com/gpu"
MAPPING = dra.DeviceClassMappings((dra.DeviceClassMapping(GPU, ("gpu.example.com",)),))


def claim_template(name: str, namespace: str, device_class: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {"deviceClassName": device_class, "count": count},
                        }
                    ]
                }
            }
        },
    }


def claiming_job(name: str, namespace: str, queue: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {C.QUEUE_NAME_LABEL: queue},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                    "containers": [
                        {
                            "name": "train",
                            "image": "busybox",
                            "resources": {
                                "requests": {"cpu": "100m"},
                                "claims": [{"name": "gpu"}],
                            },
                        }
                    ],
                }
            },
        },
    }


@pytest.fixture
async def queues(api: KubeApi, ns: str, unique: str) -> AsyncIterator[str]:
    """ClusterQueue ``dra-<unique>`` with 3 of the mapped resource; LocalQueue ``lq`` in
    ``ns``. Yields the ClusterQueue's name."""
    flavor, cq = f"dra-{unique}", f"dra-{unique}"
    async with b.queue_set(
        api,
        b.resource_flavor(flavor),
        b.cluster_queue(cq, {flavor: {"cpu": "10", GPU: 3}}),
        b.local_queue(ns, "lq", cq),
    ):
        yield cq


async def reserved(api: KubeApi, ns: str, job: str) -> dict[str, Any] | None:
    wl = await workload_of(api, ns, job)
    return wl if wl is not None and ws.has_reservation(wl) else None


async def test_device_claims_are_charged_once_through_the_mapping(
    api: KubeApi, ns: str, queues: str
) -> None:
    settings = ControllerSettings(status_period=0.3, device_class_mappings=MAPPING)
    controller = ClusterController(api, settings)
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        await api.create(
            R.RESOURCE_CLAIM_TEMPLATES, claim_template("two-gpus", ns, "gpu.example.com", 2), ns
        )
        await api.create(
            R.RESOURCE_CLAIM_TEMPLATES, claim_template("fpga", ns, "fpga.example.com", 1), ns
        )

        # Charged 2 of the mapped resource, as status.admission shows.
        await api.create(R.JOBS, claiming_job("first", ns, "lq", "two-gpus"), ns)
        first = await wait_for(lambda: reserved(api, ns, "first"), timeout=30, what="first")
        assert first is not None
        (psa,) = ws.status_of(first)["admission"]["podSetAssignments"]
        assert psa["resourceUsage"][GPU] == "2"
        recorded = draannotations.recorded_charge(first["metadata"]["annotations"])
        assert recorded == {"main": {GPU: "2"}}

        # A second one waits for its 2: 1 is left.
        await api.create(R.JOBS, claiming_job("second", ns, "lq", "two-gpus"), ns)

        async def waiting() -> dict[str, Any] | None:
            found = condition(await workload_of(api, ns, "second"), C.QUOTA_RESERVED)
            return found if found and found["status"] == "False" else None

        said = await wait_for(waiting, timeout=30, what="second waits for quota")
        assert said is not None
        assert f"insufficient unused quota for {GPU}" in said["message"], said
        assert "2 requested, 1 available" in said["message"], said

        # An unmapped class: Inadmissible with upstream's reason, nothing reserved.
        await api.create(R.JOBS, claiming_job("unmapped", ns, "lq", "fpga"), ns)

        async def refused() -> dict[str, Any] | None:
            found = condition(await workload_of(api, ns, "unmapped"), C.QUOTA_RESERVED)
            return found if found and found["reason"] == C.REASON_INADMISSIBLE else None

        said = await wait_for(refused, timeout=30, what="unmapped is inadmissible")
        assert said is not None and said["status"] == "False"
        assert said["message"] == (
            "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: "
            'Not found: "DeviceClass fpga.example.com is not mapped in DRA configuration for '
            'podset main"'
        )
        unmapped = await workload_of(api, ns, "unmapped")
        assert unmapped is not None and not ws.has_reservation(unmapped)
        assert (await api.get(R.JOBS, "unmapped", ns))["spec"]["suspend"] is True

        # The template changed after admission (its spec is immutable: replaced under the
        # same name) asks 1 now: the running job's charge stays 2, and the queue has exactly
        # 1 left for a new job charged under the new template (the second still waits).
        await api.delete(R.RESOURCE_CLAIM_TEMPLATES, "two-gpus", ns)
        await api.create(
            R.RESOURCE_CLAIM_TEMPLATES, claim_template("two-gpus", ns, "gpu.example.com", 1), ns
        )
        await api.create(R.JOBS, claiming_job("third", ns, "lq", "two-gpus"), ns)
        third = await wait_for(lambda: reserved(api, ns, "third"), timeout=30, what="third")
        assert third is not None
        (psa,) = ws.status_of(third)["admission"]["podSetAssignments"]
        assert psa["resourceUsage"][GPU] == "1"
        first = await workload_of(api, ns, "first")
        assert first is not None
        (psa,) = ws.status_of(first)["admission"]["podSetAssignments"]
        assert psa["resourceUsage"][GPU] == "2"
        second = await workload_of(api, ns, "second")
        assert second is not None and not ws.has_reservation(second)
    finally:
        await stop_tasks([task])
