"""What the quota cache (cache.py) holds: a workload holding quota, the cohort and
ClusterQueue nodes of the quota tree with their quotas and usage, and a LocalQueue's usage."""

from __future__ import annotations

from manager.core import quota
from manager.core.decisions import Admission
from manager.core.model import (
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    FlavorName,
    FlavorResource,
    ResourceGroup,
    ResourceName,
    Workload,
    WorkloadKey,
)
from manager.core.quota import Quota, QuotaNode


class AdmittedWorkload:
    """A workload holding quota: reserving (QuotaReserved) and maybe admitted (checks Ready)."""

    __slots__ = (
        "admission",
        "admitted",
        "assumed",
        "evicting",
        "local_queue",
        "order_time",
        "reserved_at",
        "usage",
        "used_frs",
        "workload",
    )

    def __init__(
        self,
        workload: Workload,
        admission: Admission,
        *,
        reserved_at: float,
        order_time: float,
        admitted: bool,
        assumed: bool,
    ) -> None:
        self.workload = workload
        self.admission = admission
        self.usage = admission.usage()
        self.used_frs = frozenset(self.usage)
        self.local_queue = workload.local_queue
        self.reserved_at = reserved_at
        self.order_time = order_time
        self.admitted = admitted
        self.assumed = assumed
        self.evicting = False
        """An eviction (preemption or drain) was decided; the controller hasn't done it yet."""

    @property
    def key(self) -> WorkloadKey:
        return self.workload.key

    @property
    def cluster_queue(self) -> ClusterQueueName:
        return self.admission.cluster_queue

    @property
    def priority(self) -> int:
        return self.workload.priority


class CohortState(QuotaNode):
    __slots__ = ("child_cohorts", "child_cqs", "in_cycle", "spec")

    def __init__(self, name: CohortName) -> None:
        super().__init__(name)
        self.spec: Cohort | None = None  # None: implicit, only named by its members
        self.child_cqs: dict[ClusterQueueName, ClusterQueueState] = {}
        self.child_cohorts: dict[CohortName, CohortState] = {}
        self.in_cycle = False


class ClusterQueueState(QuotaNode):
    __slots__ = (
        "admitted_count",
        "admitted_usage",
        "flavor_order",
        "inactive",
        "rg_by_resource",
        "spec",
        "workloads",
    )

    def __init__(self, spec: ClusterQueue, workloads: dict[WorkloadKey, AdmittedWorkload]) -> None:
        super().__init__(spec.name)
        self.spec = spec
        self.workloads = workloads
        """Workloads holding quota here (shared with Cache.by_cluster_queue)."""
        self.admitted_usage: dict[FlavorResource, int] = {}
        self.admitted_count = 0
        self.inactive: tuple[str, str] | None = None
        """(Active=False condition reason, message), or None when active."""
        self.rg_by_resource: dict[ResourceName, ResourceGroup] = {}
        self.flavor_order: tuple[FlavorName, ...] = ()
        self.apply_spec(spec)
        for workload in workloads.values():
            self.account(workload, sign=1)

    @property
    def cohort(self) -> CohortState | None:
        parent = self.parent
        return parent if isinstance(parent, CohortState) else None

    def apply_spec(self, spec: ClusterQueue) -> None:
        self.spec = spec
        self.fair_weight = spec.fair_sharing_weight
        self.quotas = quotas_of(spec.resource_groups)
        self.subtree_quota = {fr: q.nominal for fr, q in self.quotas.items()}
        self.rg_by_resource = {r: rg for rg in spec.resource_groups for r in rg.covered_resources}
        self.flavor_order = tuple(
            dict.fromkeys(f.name for rg in spec.resource_groups for f in rg.flavors)
        )

    def account(self, workload: AdmittedWorkload, *, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) a workload's usage, bubbling into the cohort."""
        for fr, value in workload.usage.items():
            if sign > 0:
                quota.add_usage(self, fr, value)
            else:
                quota.remove_usage(self, fr, value)
        if workload.admitted:
            self.admitted_count += sign
            add_usage_to(self.admitted_usage, workload.usage, sign)


class LocalQueueUsage:
    __slots__ = ("admitted", "reservation", "reserving", "usage")

    def __init__(self) -> None:
        self.reserving = 0
        self.admitted = 0
        self.reservation: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}


def quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, Quota]:
    return {
        (flavor.name, rq.name): Quota(rq.nominal, rq.borrowing_limit, rq.lending_limit)
        for rg in groups
        for flavor in rg.flavors
        for rq in flavor.resources
    }


def add_usage_to(
    into: dict[FlavorResource, int], usage: dict[FlavorResource, int], sign: int
) -> None:
    for fr, value in usage.items():
        into[fr] = into.get(fr, 0) + sign * value
