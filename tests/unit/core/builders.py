"""Test objects for the admission core, built like Kueue's testing wrappers.

    make_workload("light", "ml-jobs").queue("gpu-lq").request("nvidia.com/gpu", "1").obj()

Quantities are written as in YAML ("2", "500m", "4Gi") and converted to the core's ints
(milli-units for cpu, plain units for everything else).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Self

from manager.core import (
    AdmissionCore,
    BorrowWithinCohort,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ClusterQueueName,
    ClusterQueuePreemption,
    Cohort,
    CohortName,
    CycleResult,
    FlavorFungibility,
    FlavorName,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    Namespace,
    NodeSelectorTerm,
    PodSet,
    PodSetName,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    StopPolicy,
    Taint,
    TaintEffect,
    Toleration,
    TopologyRequest,
    Workload,
    WorkloadKey,
)

_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_QUANTITY = re.compile(r"^(\d+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def quantity(resource: str, value: str | int) -> int:
    """Parse a Kubernetes quantity into the core's int for ``resource``."""
    if isinstance(value, int):
        return value * 1000 if resource == "cpu" else value
    match = _QUANTITY.match(value)
    assert match, f"unsupported quantity {value!r}"
    number, suffix = int(match.group(1)), match.group(2) or ""
    if suffix == "m":
        assert resource == "cpu", "milli-units only for cpu in these tests"
        return number
    scaled = number * _SUFFIXES[suffix]
    return scaled * 1000 if resource == "cpu" else scaled


def key(name: str, namespace: str = "default") -> WorkloadKey:
    return WorkloadKey(f"{namespace}/{name}")


class WorkloadBuilder:
    def __init__(self, name: str, namespace: str) -> None:
        self._key = key(name, namespace)
        self._queue = "lq"
        self._priority = 0
        self._created = 0.0
        self._uid = ""
        self._pod_sets: list[PodSet] = [PodSet(PodSetName("main"), 1, {})]

    def queue(self, name: str) -> Self:
        self._queue = name
        return self

    def priority(self, value: int) -> Self:
        self._priority = value
        return self

    def created(self, at: float) -> Self:
        self._created = at
        return self

    def uid(self, value: str) -> Self:
        self._uid = value
        return self

    def pod_set(self, name: str, count: int = 1) -> Self:
        """Start another pod set; following calls configure it."""
        if self._pod_sets == [PodSet(PodSetName("main"), 1, {})]:
            self._pod_sets = []
        self._pod_sets.append(PodSet(PodSetName(name), count, {}))
        return self

    def count(self, count: int) -> Self:
        return self._edit(count=count)

    def request(self, resource: str, value: str | int) -> Self:
        requests = dict(self._pod_sets[-1].requests)
        requests[ResourceName(resource)] = quantity(resource, value)
        return self._edit(requests=requests)

    def node_selector(self, label: str, value: str) -> Self:
        selector = dict(self._pod_sets[-1].node_selector)
        selector[label] = value
        return self._edit(node_selector=selector)

    def affinity(self, *terms: NodeSelectorTerm) -> Self:
        return self._edit(node_affinity=terms)

    def toleration(self, toleration: Toleration) -> Self:
        return self._edit(tolerations=(*self._pod_sets[-1].tolerations, toleration))

    def topology(self, request: TopologyRequest) -> Self:
        return self._edit(topology_request=request)

    def _edit(self, **changes: object) -> Self:
        self._pod_sets[-1] = replace(self._pod_sets[-1], **changes)  # type: ignore[arg-type]
        return self

    def obj(self) -> Workload:
        return Workload(
            key=self._key,
            queue_name=self._queue,
            pod_sets=tuple(self._pod_sets),
            priority=self._priority,
            creation_time=self._created,
            uid=self._uid,
        )


def make_workload(name: str, namespace: str = "default") -> WorkloadBuilder:
    return WorkloadBuilder(name, namespace)


class FlavorQuotasBuilder:
    def __init__(self, flavor: str) -> None:
        self._flavor = FlavorName(flavor)
        self._resources: list[ResourceQuota] = []

    def resource(
        self,
        name: str,
        nominal: str | int,
        borrowing_limit: str | int | None = None,
        lending_limit: str | int | None = None,
    ) -> Self:
        self._resources.append(
            ResourceQuota(
                ResourceName(name),
                quantity(name, nominal),
                None if borrowing_limit is None else quantity(name, borrowing_limit),
                None if lending_limit is None else quantity(name, lending_limit),
            )
        )
        return self

    def obj(self) -> FlavorQuotas:
        return FlavorQuotas(self._flavor, tuple(self._resources))


def make_flavor_quotas(flavor: str) -> FlavorQuotasBuilder:
    return FlavorQuotasBuilder(flavor)


def _group(flavors: Iterable[FlavorQuotas]) -> ResourceGroup:
    flavors = tuple(flavors)
    covered = tuple(dict.fromkeys(r.name for f in flavors for r in f.resources))
    return ResourceGroup(covered, flavors)


class ClusterQueueBuilder:
    def __init__(self, name: str) -> None:
        self._cq = ClusterQueue(ClusterQueueName(name), namespace_selector=LabelSelector())

    def resource_group(self, *flavors: FlavorQuotas) -> Self:
        """A resource group covering every resource its flavors list, flavors in order."""
        self._cq = replace(self._cq, resource_groups=(*self._cq.resource_groups, _group(flavors)))
        return self

    def cohort(self, name: str) -> Self:
        self._cq = replace(self._cq, cohort=CohortName(name))
        return self

    def strict_fifo(self) -> Self:
        self._cq = replace(self._cq, queueing_strategy=QueueingStrategy.STRICT_FIFO)
        return self

    def namespace_selector(self, selector: LabelSelector | None) -> Self:
        self._cq = replace(self._cq, namespace_selector=selector)
        return self

    def preemption(
        self,
        *,
        within: PreemptionPolicy = PreemptionPolicy.NEVER,
        reclaim: PreemptionPolicy = PreemptionPolicy.NEVER,
        borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER,
        max_priority_threshold: int | None = None,
    ) -> Self:
        self._cq = replace(
            self._cq,
            preemption=ClusterQueuePreemption(
                within_cluster_queue=within,
                reclaim_within_cohort=reclaim,
                borrow_within_cohort=BorrowWithinCohort(
                    borrow_within_cohort, max_priority_threshold
                ),
            ),
        )
        return self

    def fungibility(self, fungibility: FlavorFungibility) -> Self:
        self._cq = replace(self._cq, flavor_fungibility=fungibility)
        return self

    def stop_policy(self, policy: StopPolicy) -> Self:
        self._cq = replace(self._cq, stop_policy=policy)
        return self

    def weight(self, weight: float) -> Self:
        self._cq = replace(self._cq, fair_sharing_weight=weight)
        return self

    def obj(self) -> ClusterQueue:
        return self._cq


def make_cluster_queue(name: str) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name)


def make_cohort(name: str, parent: str | None = None, *flavors: FlavorQuotas) -> Cohort:
    groups = (_group(flavors),) if flavors else ()
    return Cohort(CohortName(name), None if parent is None else CohortName(parent), groups)


def make_flavor(
    name: str, *, labels: dict[str, str] | None = None, taints: tuple[Taint, ...] = ()
) -> ResourceFlavor:
    return ResourceFlavor(FlavorName(name), labels or {}, taints)


def no_schedule(key_: str, value: str = "") -> Taint:
    return Taint(key_, TaintEffect.NO_SCHEDULE, value)


def make_local_queue(
    name: str, namespace: str, cluster_queue: str, stop_policy: StopPolicy = StopPolicy.NONE
) -> LocalQueue:
    return LocalQueue(Namespace(namespace), name, ClusterQueueName(cluster_queue), stop_policy)


def admitted_keys(result: CycleResult) -> list[str]:
    return [a.workload for a in result.admitted]


def run_until_quiet(core: AdmissionCore, now: float, *, limit: int = 100) -> list[CycleResult]:
    """Run cycles until one makes no progress possible, as a controller loop would."""
    results = []
    for _ in range(limit):
        result = core.schedule(now)
        results.append(result)
        if not result.more:
            break
    return results


def all_admitted(results: Iterable[CycleResult]) -> list[str]:
    return [a for r in results for a in admitted_keys(r)]


def all_victims(results: Iterable[CycleResult]) -> list[tuple[str, str]]:
    return [(v.workload, v.reason) for r in results for p in r.preempted for v in p.victims]
