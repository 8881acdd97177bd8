"""The quota cache: flavors, ClusterQueues, cohorts and the workloads holding quota.

It is the single source of truth for usage. An admission decided by the scheduler is
*assumed* here at once, so the very next decision already sees it; the controller
later confirms it, or the facade forgets it when the API write fails.

Admitted workloads are indexed by ClusterQueue name even while that ClusterQueue
doesn't exist (e.g. during a restart, when workloads may be listed before queues), so
their usage counts as soon as the queue appears and nothing can be admitted twice.

The states it holds (a workload holding quota, the quota tree's nodes, a LocalQueue's usage)
are cachestate.py's.
"""

from __future__ import annotations

from manager.core import quota
from manager.core.cachestate import (
    AdmittedWorkload,
    ClusterQueueState,
    CohortState,
    LocalQueueUsage,
    add_usage_to,
    quotas_of,
)
from manager.core.decisions import Admission
from manager.core.model import (
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    FlavorName,
    LocalQueueKey,
    ResourceFlavor,
    StopPolicy,
    Workload,
    WorkloadKey,
)
from manager.core.tas_cache import TopologyCache

INACTIVE_STOPPED = "Stopped"
INACTIVE_FLAVOR_NOT_FOUND = "FlavorNotFound"
INACTIVE_COHORT_CYCLE = "CohortCycle"


class Cache:
    def __init__(self) -> None:
        self.flavors: dict[FlavorName, ResourceFlavor] = {}
        self.cluster_queues: dict[ClusterQueueName, ClusterQueueState] = {}
        self.cohorts: dict[CohortName, CohortState] = {}
        self.workloads: dict[WorkloadKey, AdmittedWorkload] = {}
        self.by_cluster_queue: dict[ClusterQueueName, dict[WorkloadKey, AdmittedWorkload]] = {}
        self.local_queues: dict[LocalQueueKey, LocalQueueUsage] = {}
        self.config_version = 0
        """Bumped on every change of flavors, queues, cohorts or their active state."""
        self.tas = TopologyCache()
        """Topologies, nodes and the domains admitted workloads hold (topology-aware)."""

    # -- versions: has anything a nomination reads changed since? ------------------------

    def tree_version(self, cq: ClusterQueueState) -> tuple[int, int, int]:
        """Equal for two reads only if nothing a nomination in ``cq`` reads changed between
        them: the configuration, and the workloads holding quota in its cohort tree (who
        they are, their priority, whether they are being evicted)."""
        root = cq.root()
        return self.config_version, id(root), root.version

    def _touch(self, name: ClusterQueueName) -> None:
        cq = self.cluster_queues.get(name)
        if cq is not None:
            cq.root().version += 1

    def set_evicting(self, entry: AdmittedWorkload, evicting: bool) -> None:
        """An eviction was decided (or its write failed): candidates are ranked by it."""
        entry.evicting = evicting
        self._touch(entry.cluster_queue)

    def refresh(self, entry: AdmittedWorkload, workload: Workload) -> None:
        """A workload holding quota changed its spec (its priority, say)."""
        entry.workload = workload
        self._touch(entry.cluster_queue)

    # -- configuration ---------------------------------------------------------------

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        self.flavors[flavor.name] = flavor
        self.config_version += 1

    def delete_flavor(self, name: FlavorName) -> None:
        self.flavors.pop(name, None)
        self.config_version += 1

    def upsert_cluster_queue(self, spec: ClusterQueue) -> None:
        state = self.cluster_queues.get(spec.name)
        if state is None:
            workloads = self.by_cluster_queue.setdefault(spec.name, {})
            self.cluster_queues[spec.name] = ClusterQueueState(spec, workloads)
        else:
            state.apply_spec(spec)
        self._relink()

    def delete_cluster_queue(self, name: ClusterQueueName) -> None:
        if self.cluster_queues.pop(name, None) is not None:
            self._relink()

    def upsert_cohort(self, spec: Cohort) -> None:
        self._cohort(spec.name).spec = spec
        self._relink()

    def delete_cohort(self, name: CohortName) -> None:
        cohort = self.cohorts.get(name)
        if cohort is not None:
            cohort.spec = None
            self._relink()

    def _cohort(self, name: CohortName) -> CohortState:
        cohort = self.cohorts.get(name)
        if cohort is None:
            cohort = self.cohorts[name] = CohortState(name)
        return cohort

    def _relink(self) -> None:
        """Rebuild the cohort forest from specs, then every tree's quota and usage.

        Runs on configuration changes only (rare, and O(queues + cohorts)), which keeps
        the incremental bookkeeping on the hot path trivially consistent.
        """
        self.config_version += 1
        for cohort in self.cohorts.values():
            cohort.parent = None
            cohort.child_cqs = {}
            cohort.child_cohorts = {}
            cohort.in_cycle = False
        for cq in self.cluster_queues.values():
            if cq.spec.cohort is not None:
                self._cohort(cq.spec.cohort)
        for cohort in list(self.cohorts.values()):
            if cohort.spec is not None and cohort.spec.parent is not None:
                self._cohort(cohort.spec.parent)
        self._mark_cycles()
        for cohort in self.cohorts.values():
            spec = cohort.spec
            cohort.quotas = quotas_of(spec.resource_groups) if spec else {}
            cohort.fair_weight = spec.fair_sharing_weight if spec else 1.0
            if spec is not None and spec.parent is not None and not cohort.in_cycle:
                parent = self.cohorts[spec.parent]
                cohort.parent = parent
                parent.child_cohorts[CohortName(cohort.name)] = cohort
        for cq in self.cluster_queues.values():
            cq.parent = None
            if cq.spec.cohort is not None:
                cohort = self.cohorts[cq.spec.cohort]
                cq.parent = cohort
                cohort.child_cqs[cq.spec.name] = cq
        # Forget implicit cohorts nobody names any more.
        for name in [
            n
            for n, c in self.cohorts.items()
            if c.spec is None and not c.child_cqs and not c.child_cohorts
        ]:
            del self.cohorts[name]
        for cohort in self.cohorts.values():
            if cohort.parent is None:
                _rebuild(cohort)

    def _mark_cycles(self) -> None:
        for start in self.cohorts:
            path: list[CohortName] = []
            current: CohortName | None = start
            while current is not None and current not in path:
                path.append(current)
                spec = self.cohorts[current].spec
                current = spec.parent if spec is not None else None
            if current is not None:
                for name in path[path.index(current) :]:
                    self.cohorts[name].in_cycle = True

    def refresh_active(self) -> list[ClusterQueueName]:
        """Recompute every ClusterQueue's Active state; return those that changed, in order."""
        changed: list[ClusterQueueName] = []
        for name, cq in self.cluster_queues.items():
            inactive = self._inactive_reason(cq)
            if inactive != cq.inactive:
                cq.inactive = inactive
                changed.append(name)
        if changed:
            self.config_version += 1
        return changed

    def _inactive_reason(self, cq: ClusterQueueState) -> tuple[str, str] | None:
        if cq.spec.stop_policy is not StopPolicy.NONE:
            return INACTIVE_STOPPED, f"stopPolicy is {cq.spec.stop_policy}"
        if cq.spec.configuration_problem is not None:
            return cq.spec.configuration_problem
        missing = [f for f in cq.flavor_order if f not in self.flavors]
        if missing:
            return INACTIVE_FLAVOR_NOT_FOUND, f"flavor {', '.join(missing)} not found"
        cohort = cq.cohort
        while cohort is not None:
            if cohort.in_cycle:
                return INACTIVE_COHORT_CYCLE, f"cohort {cohort.name} is part of a cycle"
            parent = cohort.parent
            cohort = parent if isinstance(parent, CohortState) else None
        if cq.spec.cohort is not None and self.cohorts[cq.spec.cohort].in_cycle:
            return INACTIVE_COHORT_CYCLE, f"cohort {cq.spec.cohort} is part of a cycle"
        return None

    def tree_members(self, name: ClusterQueueName) -> list[ClusterQueueName]:
        """The ClusterQueues sharing quota with ``name`` (its whole cohort tree)."""
        cq = self.cluster_queues.get(name)
        if cq is None:
            return [name]
        root = cq.root()
        if not isinstance(root, CohortState):
            return [name]
        members: list[ClusterQueueName] = []
        stack: list[CohortState] = [root]
        while stack:
            cohort = stack.pop()
            members.extend(cohort.child_cqs)
            stack.extend(cohort.child_cohorts.values())
        return members

    # -- workloads holding quota -------------------------------------------------------

    def reserve(
        self,
        workload: Workload,
        admission: Admission,
        *,
        reserved_at: float,
        order_time: float,
        admitted: bool,
        assumed: bool,
    ) -> AdmittedWorkload:
        """Count a workload's admission against its ClusterQueue (and LocalQueue)."""
        entry = AdmittedWorkload(
            workload,
            admission,
            reserved_at=reserved_at,
            order_time=order_time,
            admitted=admitted,
            assumed=assumed,
        )
        self.workloads[workload.key] = entry
        self.by_cluster_queue.setdefault(admission.cluster_queue, {})[workload.key] = entry
        self.tas.add_workload(workload, admission)
        cq = self.cluster_queues.get(admission.cluster_queue)
        if cq is not None:
            cq.account(entry, sign=1)
            cq.root().version += 1
        self._account_local_queue(entry, sign=1)
        return entry

    def release(self, key: WorkloadKey) -> AdmittedWorkload | None:
        """Drop a workload's admission and give its quota back."""
        entry = self.workloads.pop(key, None)
        if entry is None:
            return None
        self.tas.remove_workload(key)
        by_cq = self.by_cluster_queue.get(entry.cluster_queue)
        if by_cq is not None:
            by_cq.pop(key, None)
        cq = self.cluster_queues.get(entry.cluster_queue)
        if cq is not None:
            cq.account(entry, sign=-1)
            cq.root().version += 1
        self._account_local_queue(entry, sign=-1)
        return entry

    def set_admitted(self, key: WorkloadKey) -> bool:
        entry = self.workloads.get(key)
        if entry is None or entry.admitted:
            return False
        cq = self.cluster_queues.get(entry.cluster_queue)
        if cq is not None:
            cq.admitted_count += 1
            add_usage_to(cq.admitted_usage, entry.usage, 1)
        lq = self.local_queues.setdefault(entry.local_queue, LocalQueueUsage())
        lq.admitted += 1
        add_usage_to(lq.usage, entry.usage, 1)
        entry.admitted = True
        return True

    def _account_local_queue(self, entry: AdmittedWorkload, *, sign: int) -> None:
        lq = self.local_queues.setdefault(entry.local_queue, LocalQueueUsage())
        lq.reserving += sign
        add_usage_to(lq.reservation, entry.usage, sign)
        if entry.admitted:
            lq.admitted += sign
            add_usage_to(lq.usage, entry.usage, sign)

    # -- what-if, for preemption -------------------------------------------------------

    def simulate_removal(self, entry: AdmittedWorkload) -> None:
        """Take a workload's usage out of the quota tree only (undo with simulate_restore)."""
        cq = self.cluster_queues.get(entry.cluster_queue)
        if cq is not None:
            for fr, value in entry.usage.items():
                quota.remove_usage(cq, fr, value)

    def simulate_restore(self, entry: AdmittedWorkload) -> None:
        cq = self.cluster_queues.get(entry.cluster_queue)
        if cq is not None:
            for fr, value in entry.usage.items():
                quota.add_usage(cq, fr, value)


def _rebuild(cohort: CohortState) -> None:
    cohort.subtree_quota = {fr: q.nominal for fr, q in cohort.quotas.items()}
    cohort.usage = {}
    for child in cohort.child_cohorts.values():
        _rebuild(child)
        quota.accumulate_from_child(cohort, child)
    for cq in cohort.child_cqs.values():
        cq.subtree_quota = {fr: q.nominal for fr, q in cq.quotas.items()}
        quota.accumulate_from_child(cohort, cq)
