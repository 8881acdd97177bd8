"""The seed article's queues spread over a federation: the manager has the article's queues
(plus the MultiKueue check); worker-1 offers only rtx-a1000, worker-2 and worker-3 h100."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from e2e.examples import ARTICLE
from e2e.local.federation import LocalFederation
from manager.api import constants as C
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.emptying import empty_namespace
from tests.integration.federation.bed import CHECK

SEED = ARTICLE
NS = "ml-jobs"

WORKER_FLAVORS = {
    "worker-1": ("rtx-a1000", {"cpu": 32, "memory": "128Gi", "nvidia.com/gpu": 2}),
    "worker-2": ("h100", {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 4}),
    "worker-3": ("h100", {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 4}),
}


def worker_queue_objects(
    flavor: str, quota: dict[str, Any]
) -> list[tuple[R.Resource, dict[str, Any]]]:
    return [
        (R.NAMESPACES, {"metadata": {"name": NS}}),
        (
            R.RESOURCE_FLAVORS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor},
                "spec": {"nodeLabels": {"gpu.model": flavor}},
            },
        ),
        (
            R.CLUSTER_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": "gpu-cq"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": r, "nominalQuota": q} for r, q in quota.items()
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
        (
            R.LOCAL_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": "gpu-lq", "namespace": NS},
                "spec": {"clusterQueue": "gpu-cq"},
            },
        ),
    ]


async def set_up(
    fed: LocalFederation,
    manager: KubeApi,
    workers: dict[str, KubeApi],
    only: tuple[str, ...] = ("worker-1", "worker-2"),
) -> None:
    fed.kubectl("manager", "apply", "-f", str(SEED / "01-queues.yaml"))
    await manager.patch(
        R.CLUSTER_QUEUES,
        "gpu-cq",
        {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}},
    )
    for name in only:
        flavor, quota = WORKER_FLAVORS[name]
        for res, body in worker_queue_objects(flavor, quota):
            with contextlib.suppress(errors.AlreadyExists):
                await workers[name].create(res, body, body["metadata"].get("namespace"))


async def tear_down(manager: KubeApi, workers: dict[str, KubeApi]) -> None:
    """Every cluster as before ``set_up``, but for the (empty) namespace: emptied instead of
    deleted, which spares each test the namespace controller's 5 s wait."""

    async def clear(api: KubeApi) -> None:
        await empty_namespace(api, NS)
        for res, name in (
            (R.CLUSTER_QUEUES, "gpu-cq"),
            (R.RESOURCE_FLAVORS, "rtx-a1000"),
            (R.RESOURCE_FLAVORS, "h100"),
        ):
            await api.delete(res, name)

    await asyncio.gather(*(clear(api) for api in (manager, *workers.values())))


def seed_job(name: str, **overrides: Any) -> dict[str, Any]:
    import yaml

    job: dict[str, Any] = yaml.safe_load((SEED / name).read_text())
    job["metadata"].update(overrides.pop("metadata", {}))
    job["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[
        "pod-complete.stage.kwok.x-k8s.io/delay"
    ] = str(overrides.pop("delay_ms", 2000))
    return job
