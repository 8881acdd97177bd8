"""Properties of the core under random configurations and event sequences (hypothesis).

A small harness plays a controller: it applies every decision (admits are confirmed or,
sometimes, forgotten; victims are evicted with a backoff; admitted workloads finish)
and keeps its *own* record of who holds what. After every cycle it checks, from that
record and the specs alone (not the core's bookkeeping):

- quota: no ClusterQueue uses more than nominal + borrowingLimit, no cohort more than
  its members lend (lendingLimit respected), per flavor and resource;
- nothing is admitted twice;
- StrictFIFO: an admitted workload had no eligible workload ahead of it in its queue;
- preemption only picks victims its ClusterQueue's policy allows, and reclaims only
  from queues that were borrowing;
- the same inputs give the same decisions;
- remembering a queue's last head that found no way in changes no decision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manager.core import (
    AdmissionCore,
    BorrowWithinCohort,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ClusterQueueName,
    ClusterQueuePreemption,
    CohortName,
    CycleResult,
    FairSharingConfig,
    FlavorFungibility,
    FlavorName,
    FlavorQuotas,
    FlavorResource,
    FungibilityPolicy,
    LabelSelector,
    LocalQueue,
    Namespace,
    PodSet,
    PodSetName,
    PreemptionPolicy,
    PreemptionReason,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Workload,
    WorkloadKey,
)

FLAVORS = (FlavorName("f0"), FlavorName("f1"))
RESOURCES = (ResourceName("memory"), ResourceName("gpu"))

ALLOWING = {
    "within": (PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY),
    "reclaim": (PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.ANY),
}
ANY_POLICY = {
    "within": (PreemptionPolicy.NEVER, *ALLOWING["within"]),
    "reclaim": (PreemptionPolicy.NEVER, *ALLOWING["reclaim"]),
}


@dataclass(frozen=True)
class Scenario:
    queues: tuple[ClusterQueue, ...]
    workloads: tuple[Workload, ...]
    ops: tuple[int, ...]
    fair_sharing: bool


@st.composite
def cluster_queue(draw: st.DrawFn, index: int, crowded: bool) -> ClusterQueue:
    """A queue over one or two flavors. ``crowded``: small quotas, preemption always allowed."""
    cohort = draw(st.sampled_from((None, CohortName("c0"), CohortName("c0"), CohortName("c1"))))
    flavors = draw(st.permutations(FLAVORS).map(lambda p: p[: draw(st.integers(1, 2))]))
    nominal = st.sampled_from((1, 2) if crowded else (0, 2, 3, 4, 6))
    flavor_quotas = tuple(
        FlavorQuotas(
            f,
            tuple(
                ResourceQuota(r, draw(nominal), *_limits(draw, cohort is not None))
                for r in RESOURCES
            ),
        )
        for f in flavors
    )
    policies = ALLOWING if crowded else ANY_POLICY
    within = draw(st.sampled_from(policies["within"]))
    reclaim = draw(st.sampled_from(policies["reclaim"]))
    borrow = (
        BorrowWithinCohort(
            BorrowWithinCohortPolicy.LOWER_PRIORITY, draw(st.none() | st.integers(0, 3))
        )
        if reclaim is not PreemptionPolicy.NEVER and draw(st.booleans())
        else BorrowWithinCohort()
    )
    return ClusterQueue(
        name=ClusterQueueName(f"cq{index}"),
        resource_groups=(ResourceGroup(RESOURCES, flavor_quotas),),
        cohort=cohort,
        queueing_strategy=draw(st.sampled_from(tuple(QueueingStrategy))),
        namespace_selector=LabelSelector(),
        preemption=ClusterQueuePreemption(within, reclaim, borrow),
        flavor_fungibility=FlavorFungibility(
            draw(st.sampled_from(tuple(FungibilityPolicy))),
            draw(st.sampled_from(tuple(FungibilityPolicy))),
        ),
        fair_sharing_weight=draw(st.sampled_from((0.0, 1.0, 2.0))),
    )


def _limits(draw: st.DrawFn, in_cohort: bool) -> tuple[int | None, int | None]:
    if not in_cohort:
        return None, None
    return draw(st.none() | st.integers(0, 4)), draw(st.none() | st.integers(0, 6))


@st.composite
def workload(draw: st.DrawFn, index: int, queue_count: int, crowded: bool) -> Workload:
    """``crowded``: no node selectors, and later arrivals tend to outrank earlier ones."""
    selectors: tuple[dict[str, str], ...] = (
        ({},) if crowded else ({}, {}, {"flavor": "f0"}, {"flavor": "f1"})
    )
    sizes = (1,) if crowded else (0, 1, 1, 2)
    pod_sets = tuple(
        PodSet(
            PodSetName(f"ps{i}"),
            1 if crowded else draw(st.sampled_from((1, 1, 2))),
            {r: draw(st.sampled_from(sizes)) for r in RESOURCES},
            node_selector=draw(st.sampled_from(selectors)),
        )
        for i in range(1 if crowded else draw(st.sampled_from((1, 1, 2))))
    )
    return Workload(
        key=WorkloadKey(f"ns/w{index}"),
        queue_name=f"lq{draw(st.integers(0, queue_count - 1))}",
        pod_sets=pod_sets,
        priority=draw(st.integers(0, 2)) + (index // 3 if crowded else 0),
        creation_time=float(index),
        uid=f"uid-{index}",
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    crowded = draw(st.booleans())
    n_queues = draw(st.integers(1, 4))
    queues = tuple(draw(cluster_queue(i, crowded)) for i in range(n_queues))
    workloads = tuple(draw(workload(i, n_queues, crowded)) for i in range(draw(st.integers(4, 16))))
    ops = tuple(draw(st.lists(st.integers(0, 11), min_size=10, max_size=80)))
    return Scenario(queues, workloads, ops, draw(st.booleans()))


@dataclass
class Held:
    cq: ClusterQueueName
    usage: dict[FlavorResource, int]
    workload: Workload
    order_time: float


@dataclass
class Harness:
    """Plays the controllers and checks the invariants after every cycle."""

    scenario: Scenario
    core: AdmissionCore = field(init=False)
    specs: dict[ClusterQueueName, ClusterQueue] = field(init=False)
    held: dict[WorkloadKey, Held] = field(default_factory=dict)
    pending: dict[WorkloadKey, tuple[Workload, float, float | None]] = field(default_factory=dict)
    to_evict: list[WorkloadKey] = field(default_factory=list)
    log: list[CycleResult] = field(default_factory=list)
    now: float = 0.0
    next_workload: int = 0
    remember_no_way_in: bool = True

    def __post_init__(self) -> None:
        config = FairSharingConfig() if self.scenario.fair_sharing else None
        self.core = AdmissionCore(fair_sharing=config)
        self.core._scheduler.remember_no_way_in = self.remember_no_way_in
        self.specs = {q.name: q for q in self.scenario.queues}
        for flavor in FLAVORS:
            self.core.upsert_flavor(ResourceFlavor(flavor, {"flavor": flavor}))
        for i, queue in enumerate(self.scenario.queues):
            self.core.upsert_cluster_queue(queue)
            self.core.upsert_local_queue(LocalQueue(Namespace("ns"), f"lq{i}", queue.name))

    def run(self) -> list[CycleResult]:
        for op in self.scenario.ops:
            self.now += 1
            if op <= 3:
                self.add_workload()
            elif op <= 6:
                self.cycle()
            elif op == 7:
                self.finish_oldest()
            elif op == 8:
                self.apply_evictions()
            elif op == 9:
                self.admission_checks_ready()
            elif op == 10:
                self.change_a_held_priority()
            else:
                self.raise_a_quota()
        for _ in range(5):
            self.now += 1
            self.cycle()
        return self.log

    # -- the controller ------------------------------------------------------------------

    def add_workload(self) -> None:
        if self.next_workload < len(self.scenario.workloads):
            workload = self.scenario.workloads[self.next_workload]
            self.next_workload += 1
            self.core.add_workload(workload)
            self.pending[workload.key] = (workload, workload.creation_time, None)

    def cycle(self) -> None:
        before = {
            k: Held(h.cq, dict(h.usage), h.workload, h.order_time) for k, h in self.held.items()
        }
        result = self.core.schedule(self.now)
        self.log.append(result)
        self.check_preemptions(result, before)
        for admit in result.admitted:
            assert admit.workload not in self.held, f"{admit.workload} admitted twice"
            assert admit.workload in self.pending, f"{admit.workload} admitted but not pending"
            self.check_strict_fifo(admit.workload, admit.cluster_queue)
            workload, order_time, _ = self.pending.pop(admit.workload)
            self.held[admit.workload] = Held(
                admit.cluster_queue, dict(admit.usage), workload, order_time
            )
            assert admit.usage == admit.admission.usage()
        for victim in [v for p in result.preempted for v in p.victims] + list(result.evicted):
            self.to_evict.append(victim.workload)
        # Every fourth admission fails to be written and is rolled back.
        for i, admit in enumerate(result.admitted):
            if (len(self.log) + i) % 4 == 0:
                assert self.core.forget(admit.workload)
                held = self.held.pop(admit.workload)
                self.pending[admit.workload] = (held.workload, held.order_time, None)
            else:
                assert self.core.confirm(admit.workload)
        self.check_quota()

    def finish_oldest(self) -> None:
        if self.held:
            key = next(iter(self.held))
            self.held.pop(key)
            assert self.core.finish(key)
            if key in self.to_evict:
                self.to_evict.remove(key)

    def apply_evictions(self) -> None:
        for key in self.to_evict:
            held = self.held.pop(key)
            assert self.core.evict(key, now=self.now, requeue_at=self.now + 2)
            self.pending[key] = (held.workload, self.now, self.now + 2)
        self.to_evict = []

    def admission_checks_ready(self) -> None:
        for key in list(self.held)[:2]:
            self.core.set_admitted(key)

    def change_a_held_priority(self) -> None:
        """Its WorkloadPriorityClass changed: victims are chosen by the new priority."""
        if self.held:
            key = list(self.held)[-1]
            held = self.held[key]
            step = 2 if int(self.now) % 2 else -2
            held.workload = dataclasses.replace(
                held.workload, priority=held.workload.priority + step
            )
            self.core.add_workload(held.workload)

    def raise_a_quota(self) -> None:
        """One more of everything in the queue that waits longest (never below usage)."""
        name = sorted(self.specs)[int(self.now) % len(self.specs)]
        spec = self.specs[name]
        groups = tuple(
            dataclasses.replace(
                rg,
                flavors=tuple(
                    dataclasses.replace(
                        fq,
                        resources=tuple(
                            dataclasses.replace(rq, nominal=rq.nominal + 1) for rq in fq.resources
                        ),
                    )
                    for fq in rg.flavors
                ),
            )
            for rg in spec.resource_groups
        )
        self.specs[name] = dataclasses.replace(spec, resource_groups=groups)
        self.core.upsert_cluster_queue(self.specs[name])

    # -- the properties ------------------------------------------------------------------

    def check_quota(self) -> None:
        usage: dict[ClusterQueueName, dict[FlavorResource, int]] = {}
        for held in self.held.values():
            per_cq = usage.setdefault(held.cq, {})
            for fr, value in held.usage.items():
                per_cq[fr] = per_cq.get(fr, 0) + value
        cohort_used: dict[tuple[CohortName, FlavorResource], int] = {}
        cohort_pool: dict[tuple[CohortName, FlavorResource], int] = {}
        for name, spec in self.specs.items():
            for rg in spec.resource_groups:
                for fq in rg.flavors:
                    for rq in fq.resources:
                        fr = (fq.name, rq.name)
                        used = usage.get(name, {}).get(fr, 0)
                        if spec.cohort is None:
                            assert used <= rq.nominal, (name, fr, used)
                            continue
                        if rq.borrowing_limit is not None:
                            assert used <= rq.nominal + rq.borrowing_limit, (name, fr, used)
                        kept = (
                            max(0, rq.nominal - rq.lending_limit)
                            if rq.lending_limit is not None
                            else 0
                        )
                        cohort_used[(spec.cohort, fr)] = cohort_used.get(
                            (spec.cohort, fr), 0
                        ) + max(0, used - kept)
                        cohort_pool[(spec.cohort, fr)] = (
                            cohort_pool.get((spec.cohort, fr), 0) + rq.nominal - kept
                        )
        for slot, used in cohort_used.items():
            assert used <= cohort_pool[slot], (slot, used, cohort_pool[slot])

    def check_strict_fifo(self, key: WorkloadKey, cq: ClusterQueueName) -> None:
        if self.specs[cq].queueing_strategy is not QueueingStrategy.STRICT_FIFO:
            return
        admitted, order_time, _ = self.pending[key]
        mine = (-admitted.priority, order_time, key)
        for other_key, (other, other_time, requeue_at) in self.pending.items():
            if other_key == key or self._queue_of(other) != cq:
                continue
            if requeue_at is not None and requeue_at > self.now:
                continue
            assert (-other.priority, other_time, other_key) > mine, (
                f"{key} admitted behind {other_key} in {cq}"
            )

    def check_preemptions(self, result: CycleResult, before: dict[WorkloadKey, Held]) -> None:
        for preempt in result.preempted:
            preemptor, preemptor_time, _ = self.pending[preempt.preemptor]
            spec = self.specs[preempt.cluster_queue]
            for victim in preempt.victims:
                held = before[victim.workload]
                assert victim.cluster_queue == held.cq
                priority = held.workload.priority
                if victim.reason is PreemptionReason.IN_CLUSTER_QUEUE:
                    assert held.cq == preempt.cluster_queue
                    policy = spec.preemption.within_cluster_queue
                    assert policy is not PreemptionPolicy.NEVER
                    newer_equal = (
                        priority == preemptor.priority and preemptor_time < held.order_time
                    )
                    assert priority < preemptor.priority or (
                        policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY and newer_equal
                    )
                    continue
                victim_spec = self.specs[held.cq]
                assert held.cq != preempt.cluster_queue
                assert victim_spec.cohort is not None and victim_spec.cohort == spec.cohort
                policy = spec.preemption.reclaim_within_cohort
                assert policy is not PreemptionPolicy.NEVER
                if policy is PreemptionPolicy.LOWER_PRIORITY:
                    assert priority < preemptor.priority
                assert self._was_borrowing(held.cq, before, set(held.usage))

    def _was_borrowing(
        self, cq: ClusterQueueName, before: dict[WorkloadKey, Held], frs: set[FlavorResource]
    ) -> bool:
        used: dict[FlavorResource, int] = {}
        for held in before.values():
            if held.cq == cq:
                for fr, value in held.usage.items():
                    used[fr] = used.get(fr, 0) + value
        nominal = {
            (fq.name, rq.name): rq.nominal
            for rg in self.specs[cq].resource_groups
            for fq in rg.flavors
            for rq in fq.resources
        }
        return any(used.get(fr, 0) > nominal.get(fr, 0) for fr in frs)

    def _queue_of(self, workload: Workload) -> ClusterQueueName:
        return self.scenario.queues[int(workload.queue_name.removeprefix("lq"))].name


PROPERTY_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY_SETTINGS
@given(scenarios())
def test_invariants_hold_under_random_events(scenario: Scenario) -> None:
    Harness(scenario).run()


@PROPERTY_SETTINGS
@given(scenarios())
def test_same_inputs_give_same_decisions(scenario: Scenario) -> None:
    assert Harness(scenario).run() == Harness(scenario).run()


@PROPERTY_SETTINGS
@given(scenarios())
def test_remembering_heads_that_found_no_way_in_changes_no_decision(scenario: Scenario) -> None:
    """A queue's next head of the same shape and priority, in an unchanged cohort tree,
    gets the answer of the last one without a nomination (``cycle.NoWayIn``): the
    same decisions as nominating every head afresh, whatever happens in between
    (admissions, releases, evictions, priorities and quotas changed)."""
    remembered = Harness(scenario).run()
    afresh = Harness(scenario, remember_no_way_in=False).run()
    assert remembered == afresh


@settings(max_examples=50, deadline=None)
@given(scenarios())
def test_everything_eventually_fits_once_quota_is_ample(scenario: Scenario) -> None:
    """With every queue's quota raised above total demand, every workload gets admitted."""
    ample = tuple(
        ClusterQueue(
            name=q.name,
            resource_groups=(
                ResourceGroup(
                    RESOURCES,
                    tuple(
                        FlavorQuotas(f, tuple(ResourceQuota(r, 1000) for r in RESOURCES))
                        for f in FLAVORS
                    ),
                ),
            ),
            cohort=q.cohort,
            queueing_strategy=q.queueing_strategy,
            namespace_selector=LabelSelector(),
        )
        for q in scenario.queues
    )
    core = AdmissionCore()
    for flavor in FLAVORS:
        core.upsert_flavor(ResourceFlavor(flavor, {"flavor": flavor}))
    for i, queue in enumerate(ample):
        core.upsert_cluster_queue(queue)
        core.upsert_local_queue(LocalQueue(Namespace("ns"), f"lq{i}", queue.name))
    for w in scenario.workloads:
        core.add_workload(w)
    admitted = set()
    for _ in range(len(scenario.workloads) + 1):
        admitted |= {a.workload for a in core.schedule(now=1).admitted}
    assert admitted == {w.key for w in scenario.workloads}
