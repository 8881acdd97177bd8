"""TAS in the admission core: a pod set of a TAS flavor is admitted only with its domains.

One ClusterQueue with quota for 64 GPUs in flavor ``tas-gpu`` (topology ``default``: rack,
then hostname) over two racks of two 4-GPU nodes; quota is never what stops a workload here,
the topology is.
"""

from __future__ import annotations

import dataclasses

from manager.core import (
    HOSTNAME,
    AdmissionCore,
    DomainAssignment,
    FlavorName,
    Namespace,
    Node,
    PendingKind,
    PreemptionPolicy,
    ResourceName,
    Topology,
    TopologyAssignment,
    TopologyRequest,
    Workload,
)
from manager.core.model import ClusterQueue

from .builders import (
    admitted_keys,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)

RACK = "example.com/rack"
GPU = ResourceName("nvidia.com/gpu")
RACK_REQUIRED = TopologyRequest(required=RACK)


def gpu_node(name: str, rack: str, gpus: int = 4) -> Node:
    return Node(
        name,
        {RACK: rack, HOSTNAME: name, "gpu": "h100"},
        {GPU: gpus, ResourceName("pods"): 110},
    )


def tas_core(
    *, extra_cq: ClusterQueue | None = None, nodes: tuple[Node, ...] | None = None
) -> AdmissionCore:
    core = AdmissionCore()
    flavor = dataclasses.replace(
        make_flavor("tas-gpu", labels={"gpu": "h100"}), topology_name="default"
    )
    core.upsert_flavor(flavor)
    core.upsert_flavor(make_flavor("plain"))
    core.set_topology(Topology("default", (RACK, HOSTNAME)))
    for node in nodes or (
        gpu_node("r1-n1", "r1"),
        gpu_node("r1-n2", "r1"),
        gpu_node("r2-n1", "r2"),
        gpu_node("r2-n2", "r2"),
    ):
        core.upsert_node(node)
    core.upsert_cluster_queue(
        extra_cq
        or make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("tas-gpu").resource("nvidia.com/gpu", 64).obj())
        .obj()
    )
    core.upsert_local_queue(make_local_queue("lq", "default", extra_cq.name if extra_cq else "cq"))
    core.set_namespace_labels(Namespace("default"), {})
    return core


def gang(
    name: str, pods: int, request: TopologyRequest | None = RACK_REQUIRED, gpus: int = 1
) -> Workload:
    builder = make_workload(name).queue("lq").count(pods).request("nvidia.com/gpu", gpus)
    if request is not None:
        builder = builder.topology(request)
    return builder.obj()


def assignment_of(core: AdmissionCore, name: str) -> TopologyAssignment | None:
    admission = core.admission(key(name))
    assert admission is not None, f"{name} is not admitted"
    return admission.pod_set_assignments[0].topology_assignment


def test_a_gang_that_requires_a_rack_is_admitted_with_its_hosts_in_one_rack() -> None:
    core = tas_core()
    core.add_workload(gang("trainer", 8))
    result = core.schedule(1.0)
    assert admitted_keys(result) == [key("trainer")]
    placed = result.admitted[0].admission.pod_set_assignments[0].topology_assignment
    assert placed == TopologyAssignment(
        (HOSTNAME,), (DomainAssignment(("r1-n1",), 4), DomainAssignment(("r1-n2",), 4))
    )


def test_held_domains_send_the_next_gang_to_the_other_rack_and_a_third_waits_with_the_reason() -> (
    None
):
    core = tas_core()
    for name in ("first", "second", "third"):
        core.add_workload(gang(name, 6))
    run_until_quiet(core, 1.0)
    racks = {
        name: {
            d.values[0][:2]
            for d in (assignment_of(core, name) or TopologyAssignment((), ())).domains
        }
        for name in ("first", "second")
    }
    assert racks == {"first": {"r1"}, "second": {"r2"}}
    reason = core.pending_reason(key("third"))
    assert reason is not None
    assert reason.kind is PendingKind.TOPOLOGY_PLACEMENT_FAILED
    assert reason.message == (
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 2 '
        'out of 6 pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 2'
    )

    assert core.finish(key("first"))
    admitted = [a for r in run_until_quiet(core, 2.0) for a in admitted_keys(r)]
    assert admitted == [key("third")]


def test_a_preferred_gang_spreads_over_racks_when_no_rack_holds_it() -> None:
    core = tas_core()
    core.add_workload(gang("wide", 12, TopologyRequest(preferred=RACK)))
    core.schedule(1.0)
    placed = assignment_of(core, "wide")
    assert placed is not None and placed.pods == 12
    assert {d.values[0][:2] for d in placed.domains} == {"r1", "r2"}


def test_a_new_node_lets_a_waiting_gang_in() -> None:
    core = tas_core(nodes=(gpu_node("r1-n1", "r1"),))
    core.add_workload(gang("trainer", 8))
    assert core.schedule(1.0).admitted == ()
    snapshot = core.tas_snapshot(FlavorName("tas-gpu"))
    assert snapshot is not None and list(snapshot.leaves) == [("r1-n1",)]
    core.upsert_node(gpu_node("r1-n2", "r1"))
    assert admitted_keys(core.schedule(2.0)) == [key("trainer")]


def test_other_pods_and_unready_nodes_take_room_from_the_topology() -> None:
    core = tas_core()
    core.set_pod_usage("r1-n1", {GPU: 2, ResourceName("pods"): 1})
    core.upsert_node(dataclasses.replace(gpu_node("r2-n1", "r2"), ready=False))
    core.add_workload(gang("trainer", 7))
    core.schedule(1.0)
    reason = core.pending_reason(key("trainer"))
    assert reason is not None and "allows to fit only 6 out of 7 pod(s)" in reason.message
    core.set_pod_usage("r1-n1", {})
    assert admitted_keys(core.schedule(2.0)) == [key("trainer")]


def test_a_pod_set_that_asks_for_no_topology_does_not_get_a_tas_flavor() -> None:
    cq = (
        make_cluster_queue("cq")
        .resource_group(
            make_flavor_quotas("tas-gpu").resource("nvidia.com/gpu", 64).obj(),
            make_flavor_quotas("plain").resource("nvidia.com/gpu", 64).obj(),
        )
        .obj()
    )
    core = tas_core(extra_cq=cq)
    core.add_workload(gang("loose", 2, request=None))
    core.add_workload(gang("placed", 2))
    run_until_quiet(core, 1.0)
    loose = core.admission(key("loose"))
    assert loose is not None
    assert loose.pod_set_assignments[0].flavors == {GPU: FlavorName("plain")}
    assert loose.pod_set_assignments[0].topology_assignment is None
    assert assignment_of(core, "placed") is not None


def test_a_tas_request_on_a_queue_without_a_tas_flavor_says_why() -> None:
    cq = (
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("plain").resource("nvidia.com/gpu", 64).obj())
        .obj()
    )
    core = tas_core(extra_cq=cq)
    core.add_workload(gang("placed", 2))
    core.schedule(1.0)
    reason = core.pending_reason(key("placed"))
    assert reason is not None and reason.kind is PendingKind.NO_MATCHING_FLAVOR
    assert 'Flavor "plain" does not support TopologyAwareScheduling' in reason.message


def test_a_level_the_topology_lacks_is_a_flavor_mismatch() -> None:
    core = tas_core()
    core.add_workload(gang("odd", 2, TopologyRequest(required="example.com/block")))
    core.schedule(1.0)
    reason = core.pending_reason(key("odd"))
    assert reason is not None
    assert 'Flavor "tas-gpu" does not contain the requested level' in reason.message


def test_in_a_tas_only_queue_a_pod_set_without_a_request_is_placed_unconstrained() -> None:
    core = tas_core()
    core.add_workload(gang("implied", 5, request=None))
    core.schedule(1.0)
    placed = assignment_of(core, "implied")
    assert placed is not None and placed.pods == 5


def test_a_multikueue_queue_leaves_the_placement_to_its_worker() -> None:
    cq = dataclasses.replace(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("tas-gpu").resource("nvidia.com/gpu", 64).obj())
        .obj(),
        check_controllers=frozenset({"kueue.x-k8s.io/multikueue"}),
    )
    core = tas_core(extra_cq=cq, nodes=())
    core.delete_topology("default")
    core.add_workload(gang("remote", 32))
    result = core.schedule(1.0)
    assert admitted_keys(result) == [key("remote")]
    psa = result.admitted[0].admission.pod_set_assignments[0]
    assert psa.delayed_topology and psa.topology_assignment is None


def test_a_restarted_core_counts_the_domains_admitted_workloads_hold() -> None:
    core = tas_core()
    core.add_workload(gang("first", 8))
    first = core.schedule(1.0).admitted[0]
    again = tas_core()
    again.add_admitted(gang("first", 8), first.admission, reserved_at=1.0)
    again.add_workload(gang("second", 8))
    again.schedule(2.0)
    placed = assignment_of(again, "second")
    assert placed is not None and {d.values[0][:2] for d in placed.domains} == {"r2"}


def test_a_gang_preempts_only_when_its_pods_would_fit_with_the_tas_workloads_gone() -> None:
    """Quota for 8 GPUs, all held by a low-priority gang on rack r1: a high-priority gang of
    8 preempts it (with every TAS workload gone, rack r1 holds it) and then takes the rack;
    a gang of 8 that requires one host never would fit, so it preempts nothing."""
    cq = (
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("tas-gpu").resource("nvidia.com/gpu", 8).obj())
        .preemption(within=PreemptionPolicy.LOWER_PRIORITY)
        .obj()
    )
    core = tas_core(extra_cq=cq)
    core.add_workload(gang("low", 8))
    core.schedule(1.0)
    one_host = TopologyRequest(required=HOSTNAME)  # 4 GPUs a node: 8 pods never fit
    too_big = make_workload("too-big").queue("lq").priority(100).count(8)
    core.add_workload(too_big.request("nvidia.com/gpu", 1).topology(one_host).obj())
    result = core.schedule(2.0)
    assert result.preempted == ()
    reason = core.pending_reason(key("too-big"))
    assert reason is not None and reason.kind is PendingKind.TOPOLOGY_PLACEMENT_FAILED
    core.delete_workload(key("too-big"))
    high = make_workload("high").queue("lq").priority(100).count(8).request("nvidia.com/gpu", 1)
    core.add_workload(high.topology(RACK_REQUIRED).obj())
    result = core.schedule(3.0)
    assert [v.workload for p in result.preempted for v in p.victims] == [key("low")]
    assert core.evict(key("low"), now=4.0, requeue_at=100.0)
    assert admitted_keys(core.schedule(5.0)) == [key("high")]
    placed = assignment_of(core, "high")
    assert placed is not None and placed.pods == 8


def test_a_node_that_fails_under_a_running_gang_evicts_it_and_it_is_placed_again() -> None:
    """kfed's policy for a failed node (docs/tas.md): the workload placed on it is evicted
    with upstream's reason NodeFailures, then placed again on Ready nodes."""
    core = tas_core()
    core.add_workload(gang("trainer", 8))
    core.schedule(1.0)
    core.add_workload(gang("other", 2, TopologyRequest(required=HOSTNAME)))
    core.schedule(1.5)
    assert assignment_of(core, "trainer") == TopologyAssignment(
        (HOSTNAME,), (DomainAssignment(("r1-n1",), 4), DomainAssignment(("r1-n2",), 4))
    )
    other = assignment_of(core, "other")
    assert other is not None and other.domains[0].values == ("r2-n1",)
    core.upsert_node(dataclasses.replace(gpu_node("r1-n2", "r1"), ready=False))
    result = core.schedule(2.0)
    assert [(e.workload, e.reason, e.message) for e in result.evicted] == [
        (
            key("trainer"),
            "NodeFailures",
            "Workload was evicted as there was no replacement for unhealthy node(s): r1-n2",
        )
    ]
    assert core.schedule(2.5).evicted == ()  # told once
    assert core.evict(key("trainer"), now=3.0)
    core.delete_workload(key("other"))
    assert admitted_keys(core.schedule(4.0)) == [key("trainer")]
    again = assignment_of(core, "trainer")
    assert again is not None and {d.values[0] for d in again.domains} == {"r2-n1", "r2-n2"}


def test_two_queues_that_found_the_same_rack_in_one_cycle_do_not_both_take_it() -> None:
    """Both heads were nominated against the same free racks; the one admitted second in
    the cycle finds its domains taken and is tried again, then goes to the other rack."""
    core = tas_core()
    for name in ("cq-b",):
        core.upsert_cluster_queue(
            make_cluster_queue(name)
            .resource_group(make_flavor_quotas("tas-gpu").resource("nvidia.com/gpu", 64).obj())
            .obj()
        )
    core.upsert_local_queue(make_local_queue("lq-b", "default", "cq-b"))
    core.add_workload(gang("first", 8))
    second = make_workload("second").queue("lq-b").count(8).request("nvidia.com/gpu", 1)
    core.add_workload(second.topology(RACK_REQUIRED).obj())
    result = core.schedule(1.0)
    assert len(result.admitted) == 1
    run_until_quiet(core, 2.0)
    racks = {
        name: {
            d.values[0][:2]
            for d in (assignment_of(core, name) or TopologyAssignment((), ())).domains
        }
        for name in ("first", "second")
    }
    assert sorted(map(sorted, racks.values())) == [["r1"], ["r2"]], racks
