"""What the manager follows on one worker: informers on the objects it reads there (queues,
flavors, our copies and our jobs of each federated kind the worker serves, its DRA objects,
the shim's topology report and heartbeat Lease), and whether the worker's shim can fence.
The connection and the manager's Lease there are remote.py's ``RemoteCluster``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from manager.api import constants as C
from manager.api.view import annotations_of, at
from manager.controllers.jobkinds.appwrapper import APPWRAPPER
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.informers import JobInformers
from manager.controllers.jobkinds.jaxjob import JAXJOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.leaderworkerset import LEADERWORKERSET
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.paddlejob import PADDLEJOB
from manager.controllers.jobkinds.pod import POD
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.rayjob import RAYJOB
from manager.controllers.jobkinds.serving import DEPLOYMENT, STATEFULSET
from manager.controllers.jobkinds.tfjob import TFJOB
from manager.controllers.jobkinds.trainjob import TRAINJOB
from manager.controllers.jobkinds.xgboostjob import XGBOOSTJOB
from manager.federation.settings import (
    SHIM_HEARTBEAT_LEASE,
    SHIM_MODE_ANNOTATION,
    TOPOLOGY_REPORT,
    FederationSettings,
)
from manager.kube import discovery, lease
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.informer import Informer

log = logging.getLogger(__name__)

JOBS_BY_WORKLOAD = "workload"

FEDERATED_KINDS: tuple[JobKind, ...] = (
    BATCH_JOB,
    JOBSET,
    RAYCLUSTER,
    RAYJOB,
    TRAINJOB,
    PYTORCHJOB,
    MPIJOB,
    TFJOB,
    XGBOOSTJOB,
    PADDLEJOB,
    JAXJOB,
    LEADERWORKERSET,
    APPWRAPPER,
    STATEFULSET,
    DEPLOYMENT,
    POD,
)
"""The kinds of job kfed places on workers; a worker gets one of them only while it serves
that kind (its CRD is installed there)."""
KINDS_RECHECK_SECONDS = 30.0
"""How often a connected worker is asked again which of those kinds it serves."""
DEVICE_INFORMERS: dict[str, R.Resource] = {
    "resourceslices": R.RESOURCE_SLICES,
    "resourceclaims": R.RESOURCE_CLAIMS,
    "deviceclasses": R.DEVICE_CLASSES,
}
"""A worker's DRA objects, followed while it serves ``resource.k8s.io/v1`` (placement by
devices, decisions/devices.py): every ResourceSlice and DeviceClass, and every ResourceClaim
(any namespace: a device is taken whoever claimed it)."""


def workload_keys_of_job(job: Obj) -> list[str]:
    """``namespace/name`` of the manager workload a Job of ours was made for."""
    meta = at(job, "metadata")
    name = at(meta, "labels").get(C.PREBUILT_WORKLOAD_LABEL)
    return [f"{meta.get('namespace')}/{name}"] if name else []


@dataclass
class RemoteObjects:
    """One worker's objects as the manager's informers hold them."""

    name: str
    api: KubeApi
    settings: FederationSettings
    on_change: Callable[[], None] | None = None
    """Its connection state changed (connected, lost, refused, its shim came or went)."""
    on_capacity: Callable[[], None] | None = None
    """Its queues, flavors or our copies there changed: a waiting workload may fit now."""
    kinds: list[JobKind] = field(default_factory=lambda: list(FEDERATED_KINDS))
    """The kinds the manager federates: FEDERATED_KINDS, and the external frameworks found
    so far (the registry's list, shared: ``ClusterRegistry.kinds``)."""
    informers: dict[str, Informer] = field(default_factory=dict)
    job_informers: JobInformers = field(
        default_factory=lambda: JobInformers((JOBS_BY_WORKLOAD, workload_keys_of_job))
    )
    """Our jobs there, one informer per kind it serves (found again on every connect)."""
    shim_lease: lease.LeaseObserver = field(default_factory=lease.LeaseObserver)
    device_generation: int = 0
    """Bumped on every change of its slices or classes (what the device inventory is made
    of), so that the dispatcher rebuilds that inventory only when it changed."""
    claims_generation: int = 0
    """Bumped on every change of its ResourceClaims (what is allocated)."""
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _shim_renewals_seen: int = 0
    _could_fence: bool = False

    @property
    def origin_selector(self) -> str:
        """The label selector of the objects this manager made there."""
        return f"{C.MULTIKUEUE_ORIGIN_LABEL}={self.settings.origin}"

    def __post_init__(self) -> None:
        origin = self.origin_selector
        ns = self.settings.namespace
        self.informers = {
            "clusterqueues": Informer(self.api, R.CLUSTER_QUEUES),
            "localqueues": Informer(self.api, R.LOCAL_QUEUES),
            "resourceflavors": Informer(self.api, R.RESOURCE_FLAVORS),
            "workloads": Informer(self.api, R.WORKLOADS, label_selector=origin),
            "jobs": Informer(self.api, R.JOBS, label_selector=origin),
            "leases": Informer(self.api, R.LEASES, namespace=ns),
            # TAS: the shim's topology report (worker_shim/topologyreport.py, docs/tas.md).
            "configmaps": Informer(self.api, R.CONFIGMAPS, namespace=ns),
        }
        # Our jobs there filed by the manager workload they were made for (JOBS_BY_WORKLOAD):
        # finding them must not scan every job of the worker.
        self.job_informers.add(BATCH_JOB, self.informers["jobs"])
        # Wake-ups only for what can change a decision: lease renewals (ours every few
        # seconds, the shim's heartbeat) matter only when the shim comes or goes, and Jobs
        # are followed by the dispatcher itself.
        self.informers["leases"].subscribe(lambda _: self._on_lease())
        for name in ("clusterqueues", "localqueues", "resourceflavors", "workloads", "configmaps"):
            self.informers[name].subscribe(lambda _: self._capacity_changed())

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _capacity_changed(self) -> None:
        if self.on_capacity is not None:
            self.on_capacity()

    def _on_lease(self) -> None:
        could_fence = self.can_fence
        if could_fence != self._could_fence:
            self._could_fence = could_fence
            self._changed()

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def workloads(self) -> Informer:
        return self.informers["workloads"]

    def jobs(self, kind: JobKind = BATCH_JOB) -> Informer | None:
        """Our jobs of ``kind`` there (None: the worker does not serve that kind)."""
        return self.job_informers.get(kind)

    def serves(self, kind: JobKind) -> bool:
        return kind in self.job_informers

    async def _follow_served_kinds(self) -> None:
        """Follow our jobs of each federated kind the worker serves now (a CRD installed
        after the last connect included)."""
        for kind in list(self.kinds):
            if kind in self.job_informers:
                continue
            if not await discovery.serves(self.api, kind.resource):
                continue
            informer = Informer(self.api, kind.resource, label_selector=self.origin_selector)
            self.job_informers.add(kind, informer)
            name = f"jobs.{kind.resource.group}"
            self.informers[name] = informer
            self._tasks.append(asyncio.create_task(informer.run(), name=f"{self.name}/{name}"))
            log.info("worker %s serves %s: following ours there", self.name, kind.resource.kind)

    @property
    def serves_devices(self) -> bool:
        """It serves resource.k8s.io/v1 and we follow its devices there."""
        return all(name in self.informers for name in DEVICE_INFORMERS)

    def device_objects(self) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """Its ResourceSlices, ResourceClaims and DeviceClasses as the informers hold them
        (empty while it serves no DRA)."""
        if not self.serves_devices:
            return [], [], []
        return (
            self.informers["resourceslices"].items(),
            self.informers["resourceclaims"].items(),
            self.informers["deviceclasses"].items(),
        )

    async def _follow_devices(self) -> None:
        """Follow its DRA objects once it serves resource.k8s.io/v1 (discovery, as for the
        kinds of job)."""
        if self.serves_devices or not await discovery.serves(self.api, R.RESOURCE_SLICES):
            return
        for name, resource in DEVICE_INFORMERS.items():
            informer = Informer(self.api, resource)
            if name == "resourceclaims":
                informer.subscribe(lambda _: self._claims_changed())
            else:
                informer.subscribe(lambda _: self._devices_changed())
            self.informers[name] = informer
            self._tasks.append(asyncio.create_task(informer.run(), name=f"{self.name}/{name}"))
        log.info("worker %s serves %s: following its devices", self.name, R.RESOURCE_SLICES.group)

    def node_pools(self) -> list[Obj]:
        """Its Karpenter NodePools ([]: it runs no Karpenter): which flavors grow there."""
        informer = self.informers.get("nodepools")
        return informer.items() if informer is not None else []

    async def _follow_node_pools(self) -> None:
        """Follow its NodePools once it serves karpenter.sh/v1 (discovery, as for devices)."""
        if "nodepools" in self.informers or not await discovery.serves(self.api, R.NODE_POOLS):
            return
        informer = Informer(self.api, R.NODE_POOLS)
        informer.subscribe(lambda _: self._capacity_changed())
        self.informers["nodepools"] = informer
        self._tasks.append(asyncio.create_task(informer.run(), name=f"{self.name}/nodepools"))
        log.info("worker %s serves %s: following its NodePools", self.name, R.NODE_POOLS.group)

    def _devices_changed(self) -> None:
        self.device_generation += 1
        self._capacity_changed()

    def _claims_changed(self) -> None:
        self.claims_generation += 1
        self._capacity_changed()

    def topology_report(self) -> Obj | None:
        """TAS: the shim's ConfigMap of its topology capacity, if it writes one."""
        return self.informers["configmaps"].get(f"{self.settings.namespace}/{TOPOLOGY_REPORT}")

    def _heartbeat(self) -> Obj | None:
        return self.informers["leases"].get(f"{self.settings.namespace}/{SHIM_HEARTBEAT_LEASE}")

    @property
    def shim_mode(self) -> str | None:
        """``admit`` (kfed's shim admits there), ``fence-only`` (upstream Kueue admits there,
        the shim fences), or None: no shim seen. Either mode fences alike: only ``can_fence``
        decides how this worker's copies fail over."""
        obj = self._heartbeat()
        if obj is None:
            return None
        return str(annotations_of(obj).get(SHIM_MODE_ANNOTATION) or "admit")

    def _observe_shim(self) -> None:
        obj = self._heartbeat()
        before = self.shim_lease.record
        self.shim_lease.observe(lease.LeaseRecord.from_lease(obj) if obj else None)
        if obj is not None and before is not None and self.shim_lease.record != before:
            self._shim_renewals_seen += 1

    @property
    def can_fence(self) -> bool:
        """True while kfed's worker shim runs there: we have seen its heartbeat Lease renewed
        (a Lease left by a shim that is gone proves nothing) and not expire since."""
        self._observe_shim()
        record = self.shim_lease.record
        return (
            self._shim_renewals_seen > 0
            and record is not None
            and bool(record.holder)
            and not self.shim_lease.expired()
        )
