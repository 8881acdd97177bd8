"""TAS: each worker's domain trees as the manager reads them from the shim's report (the
ConfigMap ``kfed-topology``, worker_shim/topologyreport.py), rebuilt only when the report
changed; what ``decisions/topology.py`` judges a TAS workload against."""

from __future__ import annotations

import logging

from manager.core.tas import TopologySnapshot
from manager.core.tas_summary import trees_of
from manager.federation.workers.remote import RemoteCluster

log = logging.getLogger(__name__)

Trees = dict[str, TopologySnapshot]
"""Worker flavor -> its domain tree."""


class TopologyView:
    def __init__(self) -> None:
        self._trees: dict[str, tuple[str, Trees]] = {}

    def of(self, remote: RemoteCluster) -> Trees:
        """The worker's trees ({}: its shim reports none)."""
        report = remote.topology_report()
        if report is None:
            self._trees.pop(remote.name, None)
            return {}
        version = str(report["metadata"].get("resourceVersion", ""))
        known = self._trees.get(remote.name)
        if known is not None and known[0] == version:
            return known[1]
        trees, problems = trees_of(report.get("data") or {})
        for flavor, problem in problems.items():
            log.warning(
                "worker %s: topology of flavor %s not read: %s", remote.name, flavor, problem
            )
        self._trees[remote.name] = (version, trees)
        return trees

    def memory(self) -> dict[str, int]:
        """Leaves held per worker (the bench weighs them)."""
        return {
            name: sum(len(t.leaves) for t in trees.values())
            for name, (_, trees) in self._trees.items()
        }
