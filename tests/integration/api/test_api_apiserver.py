"""kfed's CRDs in a real kube-apiserver: upstream manifests apply, objects round-trip
through the models, ``kubectl get`` shows Kueue's columns, and update rules hold."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, ApiException, CustomObjectsApi

from e2e.examples import QUEUES
from e2e.local.federation import LocalFederation
from manager.api import KubeObject, Workload, parse_object
from manager.api.constants import GROUP, VERSION

pytestmark = pytest.mark.integration

SEED_QUEUES = QUEUES
SEED_OBJECTS = [
    ("resourceflavors", "rtx-a1000", None),
    ("resourceflavors", "h100", None),
    ("clusterqueues", "gpu-cq", None),
    ("localqueues", "gpu-lq", "ml-jobs"),
]


def _kubectl_json(clusters: LocalFederation, *args: str) -> dict[str, Any]:
    result = clusters.kubectl("manager", *args, "-o", "json")
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _exists(clusters: LocalFederation, plural: str, name: str, namespace: str | None) -> bool:
    scope = ["-n", namespace] if namespace else []
    found = clusters.kubectl(
        "manager", "get", f"{plural}.{GROUP}", name, *scope, "--ignore-not-found", "-o", "name"
    )
    return bool(found.stdout.strip())


def error_message(err: ApiException) -> str:
    """The message of the Status the apiserver answered with."""
    body = err.body.decode() if isinstance(err.body, bytes) else str(err.body)
    message: str = json.loads(body)["message"]
    return message


def assert_round_trips(item: dict[str, Any]) -> KubeObject:
    """The object parses into its model and dumps back to exactly what the server sent."""
    obj = parse_object(item)
    assert obj.model_dump(mode="json", by_alias=True, exclude_unset=True) == item
    return obj


@pytest.fixture
def seed_queues(kueue_crds: LocalFederation) -> Iterator[LocalFederation]:
    """The article's queues (kfed's copy in examples/), applied unchanged; removed again unless
    they were there."""
    existed = {obj for obj in SEED_OBJECTS if _exists(kueue_crds, *obj)}
    kueue_crds.kubectl("manager", "apply", "-f", str(SEED_QUEUES))
    try:
        yield kueue_crds
    finally:
        for plural, name, namespace in SEED_OBJECTS:
            if (plural, name, namespace) not in existed:
                scope = ["-n", namespace] if namespace else []
                kueue_crds.kubectl(
                    "manager", "delete", f"{plural}.{GROUP}", name, *scope, "--ignore-not-found"
                )


def test_seed_queues_apply_and_round_trip(seed_queues: LocalFederation) -> None:
    flavors = _kubectl_json(seed_queues, "get", f"resourceflavors.{GROUP}", "rtx-a1000", "h100")
    queue = _kubectl_json(seed_queues, "get", f"clusterqueues.{GROUP}", "gpu-cq")
    local = _kubectl_json(seed_queues, "get", f"localqueues.{GROUP}", "gpu-lq", "-n", "ml-jobs")
    for item in [*flavors["items"], queue, local]:
        assert_round_trips(item)
    # The apiserver applied Kueue's defaults; the quotas keep the form they were written in.
    assert queue["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert queue["spec"]["preemption"]["withinClusterQueue"] == "Never"
    assert queue["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "TryNextFlavor",
    }
    quotas = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert [q["nominalQuota"] for q in quotas] == [32, "128Gi", 2]


def test_seed_queues_apply_again_unchanged(seed_queues: LocalFederation) -> None:
    again = seed_queues.kubectl("manager", "apply", "-f", str(SEED_QUEUES))
    assert "configured" not in again.stdout, again.stdout


def test_kubectl_get_shows_kueue_columns(seed_queues: LocalFederation) -> None:
    listing = seed_queues.kubectl("manager", "get", "cq,lq,rf", "-A").stdout
    headers = [line for line in listing.splitlines() if line.startswith(("NAME", "NAMESPACE"))]
    cq_header, lq_header, rf_header = headers
    assert cq_header.split() == [
        "NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "AGE"
    ]  # fmt: skip
    assert lq_header.split() == [
        "NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "AGE"
    ]  # fmt: skip
    assert rf_header.split()[-2:] == ["NAME", "AGE"]
    assert "gpu-cq" in listing and "BestEffortFIFO" in listing and "h100" in listing


def _workload(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "gpu-lq",
            "podSets": [
                {
                    "count": 2,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "nodeSelector": {"gpu.model": "h100"},
                            "containers": [
                                {
                                    "name": "cuda",
                                    "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
                                    "command": ["bash", "-lc", "nvidia-smi"],
                                    "resources": {
                                        "requests": {"cpu": "8", "nvidia.com/gpu": 1},
                                        "limits": {"nvidia.com/gpu": 1},
                                    },
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


RESERVED_STATUS = {
    "conditions": [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "Quota reserved in ClusterQueue gpu-cq",
            "lastTransitionTime": "2025-01-02T03:04:05Z",
        },
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "The workload is admitted",
            "lastTransitionTime": "2025-01-02T03:04:05Z",
        },
    ],
    "admission": {
        "clusterQueue": "gpu-cq",
        "podSetAssignments": [
            {
                "name": "main",
                "count": 2,
                "flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"},
                "resourceUsage": {"cpu": "16", "nvidia.com/gpu": "2"},
            }
        ],
    },
}


@pytest.fixture
async def reserved_workload(
    kueue_crds: LocalFederation, manager_api: ApiClient, unique: str
) -> AsyncIterator[str]:
    """A Workload with quota reserved and admitted, as the admission controller writes it."""
    api = CustomObjectsApi(manager_api)
    name = f"wl-{unique}"
    await api.create_namespaced_custom_object(
        GROUP, VERSION, "default", "workloads", _workload(name, "default")
    )
    try:
        await api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            "default",
            "workloads",
            name,
            [{"op": "add", "path": "/status", "value": RESERVED_STATUS}],
        )
        yield name
    finally:
        await api.delete_namespaced_custom_object(GROUP, VERSION, "default", "workloads", name)


async def test_workload_with_status_round_trips(
    reserved_workload: str, manager_api: ApiClient
) -> None:
    api = CustomObjectsApi(manager_api)
    item = await api.get_namespaced_custom_object(
        GROUP, VERSION, "default", "workloads", reserved_workload
    )
    workload = assert_round_trips(item)
    assert isinstance(workload, Workload)
    # Defaults applied by the apiserver, and fields kept inside the pod template:
    assert workload.spec.active is True
    assert workload.spec.pod_sets[0].name == "main"
    container = item["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    assert container["command"] == ["bash", "-lc", "nvidia-smi"]
    assert workload.status is not None and workload.status.admission is not None
    assert workload.status.admission.pod_set_assignments[0].flavors["nvidia.com/gpu"] == "h100"


def test_kubectl_get_workloads_shows_the_articles_columns(
    reserved_workload: str, kueue_crds: LocalFederation
) -> None:
    listing = kueue_crds.kubectl("manager", "get", "workloads", "-A").stdout.splitlines()
    assert listing[0].split() == [
        "NAMESPACE", "NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"
    ]  # fmt: skip
    row = next(line for line in listing if reserved_workload in line).split()
    assert row[:5] == ["default", reserved_workload, "gpu-lq", "gpu-cq", "True"]


async def test_queue_name_is_immutable_while_reserved(
    reserved_workload: str, manager_api: ApiClient
) -> None:
    api = CustomObjectsApi(manager_api)
    with pytest.raises(ApiException) as raised:
        await api.patch_namespaced_custom_object(
            GROUP, VERSION, "default", "workloads", reserved_workload,
            [{"op": "replace", "path": "/spec/queueName", "value": "other-lq"}],
        )  # fmt: skip
    assert raised.value.status == 422
    assert "spec.queueName is immutable while quota is reserved" in error_message(raised.value)


async def test_a_reservation_must_cover_every_pod_set(
    reserved_workload: str, manager_api: ApiClient
) -> None:
    api = CustomObjectsApi(manager_api)
    drop_assignments = [
        {"op": "replace", "path": "/status/admission/podSetAssignments", "value": []}
    ]
    with pytest.raises(ApiException) as raised:
        await api.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", "workloads", reserved_workload, drop_assignments
        )
    assert raised.value.status == 422
    assert "podSetAssignments must have one entry per pod set" in error_message(raised.value)


def test_local_queue_cannot_change_its_cluster_queue(
    kueue_crds: LocalFederation, unique: str
) -> None:
    name = f"lq-{unique}"
    manifest = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": "gpu-cq"},
    }
    kueue_crds.kubectl("manager", "apply", "-f", "-", input=json.dumps(manifest))
    try:
        manifest["spec"] = {"clusterQueue": "other-cq"}
        changed = kueue_crds.kubectl(
            "manager", "apply", "-f", "-", input=json.dumps(manifest), check=False
        )
        assert changed.returncode != 0
        assert "spec.clusterQueue" in changed.stderr
        assert "clusterQueue is immutable" in changed.stderr
    finally:
        kueue_crds.kubectl("manager", "delete", "localqueue", name, "-n", "default")


def test_multikueue_objects_round_trip_and_show_connected(
    kueue_crds: LocalFederation, unique: str
) -> None:
    cluster, config, check = f"worker-{unique}", f"workers-{unique}", f"mk-{unique}"
    manifests = [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MultiKueueCluster",
            "metadata": {"name": cluster, "annotations": {"kfed.io/maintenance": "cordon"}},
            "spec": {"clusterSource": {"kubeConfig": {"location": f"{cluster}-secret"}}},
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MultiKueueConfig",
            "metadata": {"name": config},
            "spec": {"clusters": [cluster]},
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": GROUP, "kind": "MultiKueueConfig", "name": config},
            },
        },
    ]
    kueue_crds.kubectl(
        "manager",
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}),
    )
    try:
        read = _kubectl_json(
            kueue_crds, "get", f"multikueueclusters.{GROUP}/{cluster}",
            f"multikueueconfigs.{GROUP}/{config}", f"admissionchecks.{GROUP}/{check}",
        )  # fmt: skip
        for item in read["items"]:
            assert_round_trips(item)
        assert read["items"][0]["spec"]["clusterSource"]["kubeConfig"]["locationType"] == "Secret"
        header = kueue_crds.kubectl("manager", "get", "mkc", cluster).stdout.splitlines()[0]
        assert header.split() == ["NAME", "CONNECTED", "AGE"]
    finally:
        for kind, name in [
            ("admissioncheck", check),
            ("multikueueconfig", config),
            ("multikueuecluster", cluster),
        ]:
            kueue_crds.kubectl("manager", "delete", f"{kind}.{GROUP}", name, "--ignore-not-found")
