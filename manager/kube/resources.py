"""Resource kinds as small declarative descriptors (one per kind), and the URL paths they map to."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


def key_of(obj: dict[str, object]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    assert isinstance(meta, dict)
    namespace, name = meta.get("namespace"), meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
EVENTS = Resource("", "v1", "events", "Event", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)

RESOURCE_FLAVORS = Resource(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False)
CLUSTER_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False)
LOCAL_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue", True)
WORKLOADS = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload", True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False
)
COHORTS = Resource(KUEUE_GROUP, KUEUE_VERSION, "cohorts", "Cohort", False)
ADMISSION_CHECKS = Resource(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", False)
MULTIKUEUE_CONFIGS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", "MultiKueueConfig", False
)
MULTIKUEUE_CLUSTERS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", "MultiKueueCluster", False
)
