"""The worker's topology capacity, told to the managers: a ConfigMap ``kfed-topology`` in the
shim's namespace, one key per TAS flavor holding its summary (``manager/core/tas_summary.py``:
each host's block, rack and what is free there). A manager watches it and sends a TAS
workload only to a worker with domains that hold it (``federation/decisions/topology.py``).

Written by the admitting replica (it holds the domain tree), when the tree changed and at most
once per ``period`` (a burst of pod events makes one write); a failed write is tried again
with capped, jittered backoff.
"""

from __future__ import annotations

import asyncio
import json
import logging

from manager.controllers.state import ClusterState
from manager.core.tas_summary import summarize
from manager.federation.settings import TOPOLOGY_REPORT
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.backoff import Backoff

log = logging.getLogger(__name__)

CONFIGMAP = TOPOLOGY_REPORT
"""Its name, in the shim's ``--namespace`` (the managers read it there)."""


class TopologyReport:
    def __init__(
        self, api: KubeApi, state: ClusterState, namespace: str, *, period: float = 1.0
    ) -> None:
        self.api = api
        self.state = state
        self.namespace = namespace
        self.period = period
        self._written: dict[str, str] | None = None
        self._version: int | None = None
        self.writes = 0

    def data(self) -> tuple[int, dict[str, str]]:
        version, trees = self.state.core.topology_snapshots()
        return version, {
            str(name): json.dumps(summarize(tree), separators=(",", ":"))
            for name, tree in sorted(trees.items())
        }

    async def report_once(self) -> bool:
        """Write the summaries if they changed since the last write; True when written."""
        version, data = self.data()
        if version == self._version or data == self._written:
            self._version = version
            return False
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": self.namespace},
            "data": data,
        }
        try:
            await self.api.replace(R.CONFIGMAPS, body)
        except errors.NotFound:
            await self.api.create(R.CONFIGMAPS, body, self.namespace)
        self._written, self._version = data, version
        self.writes += 1
        return True

    async def run(self) -> None:
        backoff = Backoff(initial=self.period, cap=30.0)
        while True:
            delay = self.period
            try:
                await self.report_once()
                backoff.reset()
            except errors.KubeError as err:
                delay = backoff.next_delay()
                log.warning("topology report not written (%s); again in %.1fs", err, delay)
            await asyncio.sleep(delay)
