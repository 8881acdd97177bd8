"""Resource kinds as small declarative descriptors (one per kind), and the URL paths they map to."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from manager.api.admissioncheck import AdmissionCheck
from manager.api.batch import Job
from manager.api.clusterqueue import ClusterQueue
from manager.api.cohort import Cohort
from manager.api.localqueue import LocalQueue
from manager.api.meta import ResourceInfo
from manager.api.multikueue import MultiKueueCluster, MultiKueueConfig
from manager.api.priorityclass import WorkloadPriorityClass
from manager.api.resourceflavor import ResourceFlavor
from manager.api.view import at
from manager.api.workload import Workload


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
    meta = at(obj, "metadata")
    namespace, name = meta.get("namespace"), meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def of(info: ResourceInfo) -> Resource:
    """The descriptor of a kind the api package models (its ``resource`` class attribute)."""
    return Resource(info.group, info.version, info.plural, info.kind, info.namespaced)


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
EVENTS = Resource("", "v1", "events", "Event", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
"""Read when a Workload is created, to charge its pods' device claims (api/dra.py); copied
with a workload's Job to the worker that runs it."""
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
"""A worker's devices, what is allocated of them and how they are selected: the manager's
view of a worker for placement by devices (federation/decisions/devices.py)."""
NODE_POOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool", False)
"""Karpenter's pools of nodes made on demand: a worker flavor whose nodes a NodePool makes
grows (federation/decisions/growth.py)."""
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)

JOBS = of(Job.resource)
RESOURCE_FLAVORS = of(ResourceFlavor.resource)
CLUSTER_QUEUES = of(ClusterQueue.resource)
LOCAL_QUEUES = of(LocalQueue.resource)
WORKLOADS = of(Workload.resource)
WORKLOAD_PRIORITY_CLASSES = of(WorkloadPriorityClass.resource)
COHORTS = of(Cohort.resource)
ADMISSION_CHECKS = of(AdmissionCheck.resource)
MULTIKUEUE_CONFIGS = of(MultiKueueConfig.resource)
MULTIKUEUE_CLUSTERS = of(MultiKueueCluster.resource)
CLUSTER_PROFILES = Resource(
    "multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", "ClusterProfile", True
)
"""The cluster inventory API's ClusterProfile (manager/api/clusterprofile.py): read only."""
