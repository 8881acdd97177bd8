"""The kueue objects tests arrange, as plain dicts, in one place; and ``queue_set``, which
creates a set of them on a cluster and deletes it afterwards.

Each builder gives the smallest valid object and takes keywords for what tests vary, so a
test shows only what matters to it. Folder-specific builders (``tests/unit/cli/builders``,
``tests/integration/controllers/builders``, ``tests/integration/cli/objects``) keep their
own shortcuts and build on these.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from manager.api import constants as C
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]
T0 = "2024-01-01T00:00:00Z"
"""The time every built condition and object claims: fixed, so that tests compare exactly."""
GPU = "nvidia.com/gpu"


def _kueue(kind: str, name: str, spec: Obj, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": C.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def resource_flavor(
    name: str,
    *,
    node_labels: Mapping[str, str] | None = None,
    taints: Sequence[Obj] = (),
    tolerations: Sequence[Obj] = (),
    topology: str | None = None,
) -> Obj:
    """A ResourceFlavor; ``node_labels`` None: none at all."""
    spec: Obj = {}
    if node_labels is not None:
        spec["nodeLabels"] = dict(node_labels)
    if taints:
        spec["nodeTaints"] = list(taints)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if topology:
        spec["topologyName"] = topology
    return _kueue("ResourceFlavor", name, spec)


def gpu_flavor(name: str, model: str | None = None) -> Obj:
    """A ResourceFlavor for the nodes labelled ``gpu.model: <model>`` (the flavor's name
    when not given), as the beds' GPU nodes are."""
    return resource_flavor(name, node_labels={"gpu.model": model or name})


def flavor_quotas(flavor: str, quotas: Mapping[str, Any]) -> Obj:
    """One flavor's entry in a resource group: resource -> nominal quota, or -> a dict of
    the resource's fields (``{"nominalQuota": 4, "borrowingLimit": 2}``)."""
    resources = [
        {"name": r, **(q if isinstance(q, Mapping) else {"nominalQuota": q})}
        for r, q in quotas.items()
    ]
    return {"name": flavor, "resources": resources}


def cluster_queue(
    name: str,
    quotas: Mapping[str, Mapping[str, Any]],
    *,
    covered: Sequence[str] | None = None,
    cohort: str | None = None,
    checks: Sequence[str] = (),
    **spec: Any,
) -> Obj:
    """A ClusterQueue of one resource group: ``quotas`` is flavor -> resource -> quota (see
    ``flavor_quotas``), in flavor order; ``covered`` defaults to every resource named.
    Other ``spec`` fields by their wire names (``preemption=``, ``queueingStrategy=``)."""
    flavors = [flavor_quotas(f, q) for f, q in quotas.items()]
    named = list(dict.fromkeys(r["name"] for f in flavors for r in f["resources"]))
    full: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(covered if covered is not None else named),
                "flavors": flavors,
            }
        ],
    }
    if cohort:
        full["cohortName"] = cohort
    if checks:
        full["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    full.update(spec)
    return _kueue("ClusterQueue", name, full)


def local_queue(namespace: str, name: str, cluster_queue: str) -> Obj:
    return _kueue("LocalQueue", name, {"clusterQueue": cluster_queue}, namespace)


def priority_class(name: str, value: int) -> Obj:
    body = _kueue("WorkloadPriorityClass", name, {})
    del body["spec"]
    body["value"] = value
    return body


def multikueue_check(name: str, config: str) -> Obj:
    return _kueue(
        "AdmissionCheck",
        name,
        {
            "controllerName": C.MULTIKUEUE_CONTROLLER_NAME,
            "parameters": {"apiGroup": C.GROUP, "kind": "MultiKueueConfig", "name": config},
        },
    )


def condition(kind: str, status: bool, reason: str = "", message: str = "") -> Obj:
    """A metav1.Condition (``reason`` defaults to the type)."""
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason or kind,
        "message": message,
        "lastTransitionTime": T0,
    }


def pod_set(
    name: str = "main",
    count: int = 1,
    *,
    requests: Mapping[str, Any] | None = None,
    **template_spec: Any,
) -> Obj:
    """A Workload pod set of ``count`` pods of one container asking for ``requests``;
    other pod spec fields by their wire names (``nodeSelector=``, ``priority=``)."""
    container: Obj = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": {r: str(q) for r, q in requests.items()}}
    spec = {"containers": [container], **template_spec}
    return {"name": name, "count": count, "template": {"spec": spec}}


def workload(
    name: str,
    *,
    namespace: str = "default",
    queue: str = "",
    pod_sets: Sequence[Obj] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    uid: str | None = None,
    created: str | None = None,
    status: Obj | None = None,
    **spec: Any,
) -> Obj:
    """A Workload (one pod set ``main`` of one pod unless ``pod_sets`` says otherwise); other
    ``spec`` fields by their wire names (``priority=``, ``active=``)."""
    meta: Obj = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if uid is not None:
        meta["uid"] = uid
    if created is not None:
        meta["creationTimestamp"] = created
    full: Obj = {"podSets": list(pod_sets) if pod_sets is not None else [pod_set()], **spec}
    if queue:
        full["queueName"] = queue
    body = {"apiVersion": C.API_VERSION, "kind": "Workload", "metadata": meta, "spec": full}
    if status is not None:
        body["status"] = status
    return body


_RESOURCES = {
    "ResourceFlavor": R.RESOURCE_FLAVORS,
    "ClusterQueue": R.CLUSTER_QUEUES,
    "LocalQueue": R.LOCAL_QUEUES,
    "Cohort": R.COHORTS,
    "AdmissionCheck": R.ADMISSION_CHECKS,
    "WorkloadPriorityClass": R.WORKLOAD_PRIORITY_CLASSES,
}


@contextlib.asynccontextmanager
async def queue_set(api: KubeApi, *objects: Obj) -> AsyncIterator[list[Obj]]:
    """Create ``objects`` (flavors, ClusterQueues, LocalQueues... in the order given, each
    by its kind) and yield them as created; on leaving, delete them in reverse order (one
    already gone is fine)."""
    created: list[Obj] = []
    try:
        for body in objects:
            res = _RESOURCES[body["kind"]]
            namespace = body["metadata"].get("namespace")
            created.append(await api.create(res, body, namespace))
        yield created
    finally:
        for body in reversed(created):
            meta = body["metadata"]
            await api.delete(_RESOURCES[body["kind"]], meta["name"], meta.get("namespace"))
