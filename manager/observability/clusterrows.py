"""The dashboard's and the worker gauges' rows for worker clusters: connection, maintenance,
credentials, free capacity, and the GPUs each worker holds reserved.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import at
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import capacity
from manager.federation.runtime import FederationController
from manager.federation.workers import credentials, kubeconfig
from manager.observability.units import human, natural
from manager.telemetry.metrics import (
    WorkerClusterSample,
)

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ClusterRow:
    name: str
    active: bool
    reason: str
    message: str
    maintenance: str
    """The ``kfed.io/maintenance`` annotation: "", "cordon" or "drain"."""
    can_fence: bool
    free: Mapping[tuple[str, str], int] | None
    """(flavor, resource) -> free quota in core units; None while not connected."""
    placing: int = 0
    """Copies sent there and not admitted yet."""
    running: int = 0
    """Manager workloads placed there and not finished."""
    credentials_expire_at: float | None = None
    """Unix time its kubeconfig's token or client certificate expires, when known."""
    credentials: str = ""
    """That, for a person (with the time left); "" when unknown."""
    credentials_expiring: bool = False
    """Within the manager's ``--credentials-warning`` (or past it)."""
    shim_mode: str | None = None
    """The shim's mode there: "admit", "fence-only" (upstream Kueue admits), None: none seen."""

    def sample(self) -> WorkerClusterSample:
        return WorkerClusterSample(
            name=self.name,
            active=self.active,
            maintenance=self.maintenance,
            free={k: natural(k[1], v) for k, v in (self.free or {}).items()},
            credentials_expire_at=self.credentials_expire_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "active": self.active,
            "reason": self.reason,
            "message": self.message,
            "maintenance": self.maintenance,
            "can_fence": self.can_fence,
            "shim_mode": self.shim_mode,
            "free": None
            if self.free is None
            else [
                {"flavor": f, "resource": r, "free": human(r, v)}
                for (f, r), v in sorted(self.free.items())
            ],
            "placing": self.placing,
            "running": self.running,
            "credentials": self.credentials,
            "credentials_expiring": self.credentials_expiring,
        }


def multikueue_cluster_samples(federation: FederationController) -> list[tuple[str, str, str]]:
    """(manager ClusterQueue, worker, its MultiKueueCluster's Active status) for every worker
    the ClusterQueue's MultiKueue check lists, as upstream's ``multikueue_cluster_status``
    reports them: "Unknown" before the condition is set; a listed cluster without a
    MultiKueueCluster object is left out (the AdmissionCheck reports it missing)."""
    registry = federation.registry
    samples = []
    for cq in federation.manager.state.cluster_queues.items():
        name = cq["metadata"]["name"]
        federated = federation.dispatcher.federation_of(name)
        for cluster in federated[1] if federated else []:
            mk = registry.mk_clusters.get(cluster)
            if mk is None:
                continue
            condition = conditions.find(at(mk, "status").get("conditions"), C.ACTIVE)
            samples.append((name, cluster, str((condition or {}).get("status") or "Unknown")))
    return samples


def cluster_rows(federation: FederationController) -> list[ClusterRow]:
    registry, dispatcher = federation.registry, federation.dispatcher
    running: dict[str, int] = {}
    for obj in federation.manager.state.workloads.items():
        where = ws.status_of(obj).get("clusterName")
        if where and not ws.is_finished(obj):
            running[str(where)] = running.get(str(where), 0) + 1
    rows = []
    names = sorted(
        {*registry.clusters, *(o["metadata"]["name"] for o in registry.mk_clusters.items())}
    )
    for name in names:
        entry = registry.clusters.get(name)
        if entry is None:
            active, reason, message = False, C.REASON_CLIENT_CONNECTION_FAILED, "Not started yet"
        else:
            active, reason, message = entry.condition()
        remote = entry.remote if entry is not None else None
        mk = registry.mk_clusters.get(name) or {}
        expiry = entry.expiry if entry is not None else None
        now = dt.datetime.now(dt.UTC)
        warn = dt.timedelta(seconds=federation.settings.credentials_warning)
        rows.append(
            ClusterRow(
                name=name,
                active=active,
                reason=reason,
                message=kubeconfig.redact_text(message),
                maintenance=federated.maintenance_of(mk),
                can_fence=remote.can_fence if remote is not None else False,
                shim_mode=remote.shim_mode if remote is not None else None,
                free=capacity.free_quota(dispatcher.worker_view(remote, 0))
                if remote is not None and remote.connected
                else None,
                placing=sum(1 for _, p in dispatcher.records.placements() if p.cluster == name),
                running=running.get(name, 0),
                credentials_expire_at=expiry.at.timestamp() if expiry else None,
                credentials=credentials.describe(name, expiry, now) if expiry else "",
                credentials_expiring=credentials.expiring(expiry, now, warn),
            )
        )
    return rows


def is_gpu(resource: str) -> bool:
    """nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915 and the like."""
    return "gpu" in resource.split("/")[-1] or resource.startswith("gpu.")


def gpus_reserved(federation: FederationController) -> dict[str, float]:
    """ "worker / flavor" -> GPUs reserved in the ClusterQueues of each connected worker, as
    the worker reports them (``status.flavorsReservation``)."""
    reserved: dict[str, float] = {}
    dispatcher = federation.dispatcher
    for remote in federation.registry.active():
        view = dispatcher.worker_view(remote, 0)
        for cq_name, cq in view.cluster_queues.items():
            for line in capacity.quota_lines(cq_name, cq):
                if is_gpu(line.resource):
                    key = f"{remote.name} / {line.flavor}"
                    reserved[key] = reserved.get(key, 0.0) + natural(line.resource, line.reserved)
    return reserved
