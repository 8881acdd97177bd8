"""The apiserver, with kfed's CRDs, rejects invalid objects and names the offending field.

Each case starts from a valid object and breaks one thing; the apiserver must refuse it
(422) with an error that names the field, so that a user sees what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, ApiException, CustomObjectsApi

from manager.api.constants import GROUP, VERSION

pytestmark = pytest.mark.integration

NAMESPACE = "default"
Body = dict[str, Any]


# --- valid objects to break ---------------------------------------------------------------


def resource(name: str, nominal: Any, **limits: Any) -> Body:
    return {"name": name, "nominalQuota": nominal, **limits}


def flavor(name: str, *resources: Body) -> Body:
    return {"name": name, "resources": list(resources)}


def group(covered: list[str], *flavors: Body) -> Body:
    return {"coveredResources": covered, "flavors": list(flavors)}


def gpu_group(flavor_name: str = "h100", quota: Any = 4, **limits: Any) -> Body:
    return group(
        ["nvidia.com/gpu"], flavor(flavor_name, resource("nvidia.com/gpu", quota, **limits))
    )


def cluster_queue(name: str, **spec: Any) -> Body:
    spec.setdefault("resourceGroups", [gpu_group()])
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def resource_flavor(name: str, **spec: Any) -> Body:
    return {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, **spec: Any) -> Body:
    return {
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": "cq", **spec},
    }


def cohort(name: str, **spec: Any) -> Body:
    return {"kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def mk_cluster(name: str, source: Body) -> Body:
    return {
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": source},
    }


def mk_config(name: str, clusters: list[str]) -> Body:
    return {"kind": "MultiKueueConfig", "metadata": {"name": name}, "spec": {"clusters": clusters}}


def admission_check(name: str, controller: str) -> Body:
    return {
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def priority_class(name: str, value: Any) -> Body:
    return {"kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def pod_set(name: str = "main", count: int = 1, cpu: Any = "1", **extra: Any) -> Body:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [container]}},
        **extra,
    }


def workload(name: str, *pod_sets: Body, **spec: Any) -> Body:
    return {
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"queueName": "lq", "podSets": list(pod_sets) or [pod_set()], **spec},
    }


# --- the table ----------------------------------------------------------------------------

QUOTA = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[str], Body]
    field: str
    """The field path the apiserver's message must name."""
    says: str = ""
    """Something else the message must say (for rules that point at a list)."""


CASES = [
    # ClusterQueue: quantities
    Case("negative-quota", lambda n: cluster_queue(n, resourceGroups=[gpu_group(quota=-1)]), QUOTA),
    Case(
        "negative-quota-string",
        lambda n: cluster_queue(n, resourceGroups=[gpu_group(quota="-2")]),
        QUOTA,
    ),
    Case(
        "malformed-quota",
        lambda n: cluster_queue(n, resourceGroups=[gpu_group(quota="12GB")]),
        QUOTA,
    ),
    Case(
        "fractional-exponent",
        lambda n: cluster_queue(n, resourceGroups=[gpu_group(quota="1e1.5")]),
        QUOTA,
    ),
    Case("float-quota", lambda n: cluster_queue(n, resourceGroups=[gpu_group(quota=1.5)]), QUOTA),
    Case(
        "missing-quota",
        lambda n: cluster_queue(n, resourceGroups=[group(["cpu"], flavor("f", {"name": "cpu"}))]),
        QUOTA,
    ),
    # ClusterQueue: enums and names
    Case(
        "unknown-queueing-strategy",
        lambda n: cluster_queue(n, queueingStrategy="LIFO"),
        "spec.queueingStrategy",
    ),
    Case("unknown-stop-policy", lambda n: cluster_queue(n, stopPolicy="Pause"), "spec.stopPolicy"),
    Case(
        "unknown-within-cluster-queue",
        lambda n: cluster_queue(n, preemption={"withinClusterQueue": "Always"}),
        "spec.preemption.withinClusterQueue",
    ),
    Case(
        "unknown-fungibility",
        lambda n: cluster_queue(n, flavorFungibility={"whenCanBorrow": "Borrow"}),
        "spec.flavorFungibility.whenCanBorrow",
    ),
    Case("bad-cohort-name", lambda n: cluster_queue(n, cohortName="Bad_Name"), "spec.cohortName"),
    # ClusterQueue: list limits
    Case(
        "too-many-resource-groups",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group([f"example.com/r{i}"], flavor(f"f{i}", resource(f"example.com/r{i}", 1)))
                for i in range(17)
            ],
        ),
        "spec.resourceGroups",
        says="must have at most 16 items",
    ),
    Case(
        "too-many-flavors",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group(["cpu"], *(flavor(f"f{i}", resource("cpu", 1)) for i in range(65)))
            ],
        ),
        "spec.resourceGroups[0].flavors",
        says="must have at most 64 items",
    ),
    Case(
        "no-covered-resources",
        lambda n: cluster_queue(n, resourceGroups=[group([], flavor("f", resource("cpu", 1)))]),
        "spec.resourceGroups[0].coveredResources",
    ),
    # ClusterQueue: cross-field rules
    Case(
        "borrowing-limit-without-cohort",
        lambda n: cluster_queue(n, resourceGroups=[gpu_group(borrowingLimit=2)]),
        "spec.resourceGroups",
        says="borrowingLimit must not be set when cohortName is empty",
    ),
    Case(
        "duplicate-flavor-in-group",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group(["cpu"], flavor("f", resource("cpu", 1)), flavor("f", resource("cpu", 2)))
            ],
        ),
        "spec.resourceGroups[0].flavors[1]",
        says="Duplicate value",
    ),
    Case(
        "duplicate-flavor-across-groups",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group(["cpu"], flavor("f", resource("cpu", 1))),
                group(["memory"], flavor("f", resource("memory", "1Gi"))),
            ],
        ),
        "spec.resourceGroups",
        says="a flavor must not appear in more than one resource group",
    ),
    Case(
        "resource-in-two-groups",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group(["cpu"], flavor("f1", resource("cpu", 1))),
                group(["cpu"], flavor("f2", resource("cpu", 1))),
            ],
        ),
        "spec.resourceGroups",
        says="a resource must not be covered by more than one resource group",
    ),
    Case(
        "duplicate-covered-resource",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group(["cpu", "cpu"], flavor("f", resource("cpu", 1), resource("memory", 1)))
            ],
        ),
        "spec.resourceGroups[0].coveredResources",
        says="coveredResources must not repeat a resource",
    ),
    Case(
        "resources-out-of-order",
        lambda n: cluster_queue(
            n,
            resourceGroups=[
                group(["cpu", "memory"], flavor("f", resource("memory", "1Gi"), resource("cpu", 1)))
            ],
        ),
        "spec.resourceGroups[0].flavors",
        says="each flavor must list exactly the coveredResources, in the same order",
    ),
    Case(
        "missing-covered-resource",
        lambda n: cluster_queue(
            n, resourceGroups=[group(["cpu", "memory"], flavor("f", resource("cpu", 1)))]
        ),
        "spec.resourceGroups[0].flavors",
        says="each flavor must list exactly the coveredResources",
    ),
    Case(
        "borrow-within-cohort-without-reclaim",
        lambda n: cluster_queue(
            n,
            cohortName="c",
            preemption={
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            },
        ),
        "spec.preemption.borrowWithinCohort.policy",
    ),
    Case(
        "preference-without-try-next-flavor",
        lambda n: cluster_queue(n, flavorFungibility={"preference": "BorrowingOverPreemption"}),
        "spec.flavorFungibility.preference",
    ),
    # Cohort
    Case(
        "cohort-borrowing-limit-without-parent",
        lambda n: cohort(n, resourceGroups=[gpu_group(borrowingLimit=1)]),
        "spec.resourceGroups",
        says="borrowingLimit must not be set when parentName is empty",
    ),
    # ResourceFlavor
    Case(
        "too-many-node-labels",
        lambda n: resource_flavor(n, nodeLabels={f"example.com/l{i}": "x" for i in range(9)}),
        "spec.nodeLabels",
    ),
    Case(
        "unknown-taint-effect",
        lambda n: resource_flavor(n, nodeTaints=[{"key": "k", "effect": "Sometimes"}]),
        "spec.nodeTaints",
        says="effect must be NoSchedule, PreferNoSchedule or NoExecute",
    ),
    Case(
        "toleration-exists-with-value",
        lambda n: resource_flavor(
            n, tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]
        ),
        "spec.tolerations",
        says="value must be empty when operator is Exists",
    ),
    # LocalQueue
    Case("lq-unknown-stop-policy", lambda n: local_queue(n, stopPolicy="Later"), "spec.stopPolicy"),
    Case(
        "lq-bad-cluster-queue-name",
        lambda n: local_queue(n, clusterQueue="CQ!"),
        "spec.clusterQueue",
    ),
    # MultiKueueCluster and MultiKueueConfig
    Case(
        "both-cluster-sources",
        lambda n: mk_cluster(
            n, {"kubeConfig": {"location": "s"}, "clusterProfileRef": {"name": "p"}}
        ),
        "spec.clusterSource",
        says="exactly one of kubeConfig and clusterProfileRef must be set",
    ),
    Case(
        "no-cluster-source",
        lambda n: mk_cluster(n, {}),
        "spec.clusterSource",
        says="exactly one of kubeConfig and clusterProfileRef must be set",
    ),
    Case(
        "unknown-location-type",
        lambda n: mk_cluster(n, {"kubeConfig": {"location": "s", "locationType": "URL"}}),
        "spec.clusterSource.kubeConfig.locationType",
    ),
    Case(
        "empty-kubeconfig-location",
        lambda n: mk_cluster(n, {"kubeConfig": {"location": ""}}),
        "spec.clusterSource.kubeConfig.location",
    ),
    Case(
        "duplicate-clusters",
        lambda n: mk_config(n, ["worker-1", "worker-1"]),
        "spec.clusters",
        says="clusters must not repeat a cluster",
    ),
    Case(
        "too-many-clusters", lambda n: mk_config(n, [f"w{i}" for i in range(21)]), "spec.clusters"
    ),
    Case("no-clusters", lambda n: mk_config(n, []), "spec.clusters"),
    # AdmissionCheck, WorkloadPriorityClass
    Case("empty-controller-name", lambda n: admission_check(n, ""), "spec.controllerName"),
    Case("priority-value-not-a-number", lambda n: priority_class(n, "high"), "value"),
    Case("priority-value-beyond-int32", lambda n: priority_class(n, 2**31), "value"),
    # Workload
    Case(
        "min-count-above-count",
        lambda n: workload(n, pod_set(count=2, minCount=3)),
        "spec.podSets[0].minCount",
    ),
    Case("negative-pod-count", lambda n: workload(n, pod_set(count=-1)), "spec.podSets[0].count"),
    Case(
        "negative-request",
        lambda n: workload(n, pod_set(cpu="-1")),
        "spec.podSets[0].template.spec.containers[0].resources.requests.cpu",
    ),
    Case(
        "priority-class-ref-without-priority",
        lambda n: workload(
            n, priorityClassRef={"group": GROUP, "kind": "WorkloadPriorityClass", "name": "high"}
        ),
        "spec.priority",
    ),
    Case(
        "priority-class-ref-wrong-kind",
        lambda n: workload(
            n,
            priority=1,
            priorityClassRef={"group": GROUP, "kind": "PriorityClass", "name": "high"},
        ),
        "spec.priorityClassRef.kind",
    ),
    Case(
        "too-many-pod-sets",
        lambda n: workload(n, *(pod_set(name=f"p{i}") for i in range(19))),
        "spec.podSets",
        says="must have at most 18 items",
    ),
    Case(
        "duplicate-pod-set",
        lambda n: workload(n, pod_set(), pod_set()),
        "spec.podSets[1]",
        says="Duplicate value",
    ),
    Case("bad-queue-name", lambda n: workload(n, queueName="Queue Name"), "spec.queueName"),
]

PLURALS = {
    "ClusterQueue": ("clusterqueues", False),
    "Cohort": ("cohorts", False),
    "ResourceFlavor": ("resourceflavors", False),
    "LocalQueue": ("localqueues", True),
    "MultiKueueCluster": ("multikueueclusters", False),
    "MultiKueueConfig": ("multikueueconfigs", False),
    "AdmissionCheck": ("admissionchecks", False),
    "WorkloadPriorityClass": ("workloadpriorityclasses", False),
    "Workload": ("workloads", True),
}


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 20
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_invalid_object_is_rejected_naming_the_field(
    case: Case, kueue_crds: Any, manager_api: ApiClient, unique: str
) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", **case.make(f"invalid-{unique}")}
    plural, namespaced = PLURALS[body["kind"]]
    api = CustomObjectsApi(manager_api)
    try:
        if namespaced:
            await api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, plural, body)
        else:
            await api.create_cluster_custom_object(GROUP, VERSION, plural, body)
    except ApiException as err:
        raw = err.body.decode() if isinstance(err.body, bytes) else str(err.body)
        message = json.loads(raw)["message"]
        assert err.status == 422, message
        assert case.field in message, message
        assert case.says in message, message
    else:  # accepted: clean up, then fail
        if namespaced:
            await api.delete_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, plural, body["metadata"]["name"]
            )
        else:
            await api.delete_cluster_custom_object(GROUP, VERSION, plural, body["metadata"]["name"])
        pytest.fail(f"the apiserver accepted {body}")
