"""What placing by devices reads (``decisions/devices.py`` judges it), for the group read
(placing.py): a workload's device needs, from the manager's ResourceClaimTemplates (read
once per workload and admission, and remembered), and each worker's devices, from its
informers (rebuilt only when they changed). Reads only."""

from __future__ import annotations

import logging
from collections import OrderedDict

from manager.api import draclaims
from manager.api.view import items
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.decisions import deviceinventory, deviceneed
from manager.federation.workers.remote import RemoteCluster
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj

log = logging.getLogger(__name__)

DEVICE_NEEDS = 4096
"""Workloads whose device requests (read from their ResourceClaimTemplates) are remembered."""


class DeviceReader:
    """A workload's device needs and a worker's devices, as placing reads them."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._needs: OrderedDict[str, tuple[tuple[object, ...], deviceneed.Need]] = OrderedDict()
        self._inventories: dict[
            str, tuple[int, deviceinventory.Inventory, dict[str, tuple[str, ...]]]
        ]
        self._inventories = {}
        self._taken: dict[str, tuple[int, deviceinventory.Taken]] = {}

    async def device_need(self, obj: Obj) -> deviceneed.Need:
        """What each pod of the workload asks of a worker's devices: its pod sets' claims
        from the namespace's ResourceClaimTemplates as they are on the manager (read once
        per workload and admission, and remembered), times the admitted pod counts."""
        pod_sets = items(obj, "spec", "podSets")
        names = draclaims.template_names(pod_sets)
        if not names:
            return deviceneed.Need()
        pods = {
            str(psa.get("name", "")): int(psa["count"])
            for psa in items(obj, "status", "admission", "podSetAssignments")
            if psa.get("count") is not None
        }
        meta = obj["metadata"]
        key = ws.key_of(obj)
        stamp = (meta.get("uid"), tuple(sorted(pods.items())))
        known = self._needs.get(key)
        if known is not None and known[0] == stamp:
            return known[1]
        templates: dict[str, Obj] = {}
        for name in names:
            try:
                templates[name] = await self.state.api.get(
                    R.RESOURCE_CLAIM_TEMPLATES, name, meta["namespace"]
                )
            except errors.NotFound:
                log.info("workload %s: ResourceClaimTemplate %s not found", key, name)
        need = deviceneed.need_of(pod_sets, templates, pods)
        self._needs[key] = (stamp, need)
        self._needs.move_to_end(key)
        while len(self._needs) > DEVICE_NEEDS:
            self._needs.popitem(last=False)
        return need

    def worker_devices(self, remote: RemoteCluster) -> deviceinventory.WorkerDevices | None:
        """The worker's devices as the check reads them, from its informers; the inventory
        rebuilt only when its slices or classes changed, what is taken when its claims did."""
        if not remote.serves_devices:
            return None
        slices, claims, classes = remote.device_objects()
        inv = self._inventories.get(remote.name)
        if inv is None or inv[0] != remote.device_generation:
            inv = (
                remote.device_generation,
                deviceinventory.inventory(slices),
                deviceinventory.device_classes(classes),
            )
            self._inventories[remote.name] = inv
        held = self._taken.get(remote.name)
        if held is None or held[0] != remote.claims_generation:
            held = (remote.claims_generation, deviceinventory.taken(claims))
            self._taken[remote.name] = held
        return deviceinventory.WorkerDevices(inv[1], held[1], inv[2])
