"""What TAS knows of one cluster: Topologies, Nodes, the requests of pods it does not place,
and the domains admitted TAS workloads hold (upstream's ``tas_cache.go`` and
``tas_flavor.go``).

Controllers feed it through ``AdmissionCore``; the scheduler asks it for a flavor's domain
tree (``snapshot``), built once per change and reused by every nomination until the next.
"""

from __future__ import annotations

from collections.abc import Mapping

from manager.core.decisions import Admission
from manager.core.model import FlavorName, ResourceFlavor, ResourceName, Workload, WorkloadKey
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, DomainKey, Node, Requests, Topology, usage_of


class TopologyCache:
    def __init__(self) -> None:
        self.topologies: dict[str, Topology] = {}
        self.nodes: dict[str, Node] = {}
        self.pod_usage: dict[str, Requests] = {}
        """By node: requests of scheduled, unfinished pods that no TAS workload accounts for."""
        self.held: dict[WorkloadKey, list[tuple[FlavorName, dict[DomainKey, Requests]]]] = {}
        """By admitted workload: what its topology assignments hold, per flavor and leaf."""
        self.usage: dict[FlavorName, dict[DomainKey, dict[ResourceName, int]]] = {}
        self.version = 0
        """Changes on every change that could move a placement (part of nomination keys)."""
        self.failed_hosts: set[str] = set()
        """Hostnames of nodes that were Ready and are now gone or not Ready, not yet acted on
        (the workloads placed on them are evicted: ``AdmissionCore``)."""
        self._snapshots: dict[FlavorName, tuple[int, ResourceFlavor, TopologySnapshot]] = {}

    def set_topology(self, topology: Topology) -> bool:
        if self.topologies.get(topology.name) == topology:
            return False
        self.topologies[topology.name] = topology
        self.version += 1
        return True

    def delete_topology(self, name: str) -> bool:
        if self.topologies.pop(name, None) is None:
            return False
        self.version += 1
        return True

    def upsert_node(self, node: Node) -> bool:
        before = self.nodes.get(node.name)
        if before == node:
            return False
        if before is not None and before.ready and not node.ready:
            self._failed(before)
        self.nodes[node.name] = node
        self.version += 1
        return True

    def delete_node(self, name: str) -> bool:
        gone = self.nodes.pop(name, None)
        if gone is None:
            return False
        self._failed(gone)
        self.version += 1
        return True

    def _failed(self, node: Node) -> None:
        self.failed_hosts.add(node.labels.get(HOSTNAME, node.name))

    def take_failed_hosts(self) -> set[str]:
        failed, self.failed_hosts = self.failed_hosts, set()
        return failed

    def set_pod_usage(self, node: str, usage: Requests) -> bool:
        """The summed requests of the pods on ``node`` that TAS does not place; {} for none."""
        if dict(self.pod_usage.get(node, {})) == dict(usage):
            return False
        if usage:
            self.pod_usage[node] = dict(usage)
        else:
            self.pod_usage.pop(node, None)
        self.version += 1
        return True

    def add_workload(self, workload: Workload, admission: Admission) -> None:
        """Hold the domains of an admission's topology assignments (replacing any before)."""
        self.remove_workload(workload.key)
        per_pod = {ps.name: ps.requests for ps in workload.pod_sets}
        held: list[tuple[FlavorName, dict[DomainKey, Requests]]] = []
        for psa in admission.pod_set_assignments:
            if psa.topology_assignment is None:
                continue
            flavor = next(iter(set(psa.flavors.values())), None)
            if flavor is None:
                continue
            requests = {r: v for r, v in per_pod.get(psa.name, {}).items() if r != "pods"}
            used = usage_of(psa.topology_assignment, requests)
            held.append((flavor, used))
            self._account(flavor, used, 1)
        if held:
            self.held[workload.key] = held
            self.version += 1

    def remove_workload(self, key: WorkloadKey) -> None:
        held = self.held.pop(key, None)
        if held is None:
            return
        for flavor, used in held:
            self._account(flavor, used, -1)
        self.version += 1

    def _account(self, flavor: FlavorName, used: dict[DomainKey, Requests], sign: int) -> None:
        per_leaf = self.usage.setdefault(flavor, {})
        for key, requests in used.items():
            leaf = per_leaf.setdefault(key, {})
            for resource, value in requests.items():
                leaf[resource] = leaf.get(resource, 0) + sign * value
            if not any(leaf.values()):
                del per_leaf[key]

    def snapshot(self, flavor: ResourceFlavor) -> TopologySnapshot | None:
        """The domain tree of a TAS flavor's nodes; None when its Topology is unknown."""
        if flavor.topology_name is None:
            return None
        topology = self.topologies.get(flavor.topology_name)
        if topology is None:
            return None
        cached = self._snapshots.get(flavor.name)
        if cached is not None and cached[0] == self.version and cached[1] == flavor:
            return cached[2]
        nodes = [n for n in self.nodes.values() if _matches(n.labels, flavor.node_labels)]
        snapshot = TopologySnapshot(
            topology,
            nodes,
            flavor_tolerations=flavor.tolerations,
            pod_usage=self.pod_usage,
            tas_usage=self.usage.get(flavor.name, {}),
        )
        self._snapshots[flavor.name] = (self.version, flavor, snapshot)
        return snapshot


def _matches(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())
