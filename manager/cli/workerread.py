"""One read of a worker from where the CLI runs, with the kubeconfig the manager holds in
its Secret: its queues and flavors, whether it serves the job's kind, a foreign object of the
job's name, its devices and its topology report, as the dispatcher's informers hold them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api import dra, federated
from manager.api.view import labels_of
from manager.cli.common import CliError
from manager.cli.kubeconfigs import connect_dict
from manager.cli.queuechain import by_key
from manager.controllers.jobkinds.base import JobKind
from manager.core import tas_summary
from manager.core.tas import TopologySnapshot
from manager.federation.decisions import capacity, deviceinventory, growth
from manager.federation.engine.lookups import foreign_reason
from manager.federation.settings import TOPOLOGY_REPORT
from manager.federation.workers import kubeconfig
from manager.kube import discovery, errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkerRead:
    """What one read of a worker tells: its queues, and the facts of eligibility that only the
    worker knows (it serves the job's kind; an object of the job's name is there already)."""

    view: capacity.WorkerView
    serves_kind: bool
    blocked: str | None
    devices: deviceinventory.WorkerDevices | None = None
    """Its devices as the dispatcher's informers hold them (None: it serves no DRA, or the
    job claims no devices and they were not read)."""
    catalogue: dra.DeviceCatalogue | None = None
    """Its DeviceClasses and ResourceSlices as a charge reads them (read with ``devices``)."""
    topology: Mapping[str, TopologySnapshot] | None = None
    """TAS: its shim's report (``kfed-topology``), worker flavor -> domain tree."""


async def read_worker(
    name: str,
    order: int,
    checked: kubeconfig.CheckedKubeconfig,
    namespace: str,
    kind: JobKind,
    job_name: str,
    with_devices: bool = False,
    report_namespace: str = "kueue-system",
) -> WorkerRead:
    api = await connect_dict(checked.config, checked.context, name=name)
    try:
        lqs, cqs, rfs = await asyncio.gather(
            api.list(R.LOCAL_QUEUES, namespace),
            api.list(R.CLUSTER_QUEUES),
            api.list(R.RESOURCE_FLAVORS),
        )
        serves = await discovery.serves(api, kind.resource)
        blocked = None
        if serves and job_name:
            with contextlib.suppress(errors.NotFound):
                there = await api.get(kind.resource, job_name, namespace)
                # Ours (any manager's copy) carry the origin label; anything else is foreign,
                # and the dispatcher would leave it alone and not place there.
                if not labels_of(there).get(C.MULTIKUEUE_ORIGIN_LABEL):
                    blocked = foreign_reason(kind.resource.kind, there)
        worker_devices, catalogue = await _read_devices(api) if with_devices else (None, None)
        trees = await _read_topology(api, report_namespace)
        pools = await _read_node_pools(api)
    finally:
        await api.close()
    flavors = by_key(rfs["items"])
    view = capacity.WorkerView(
        name=name,
        local_queues=by_key(lqs["items"]),
        cluster_queues=by_key(cqs["items"]),
        flavors=flavors,
        order=order,
        grows=growth.grown_flavors(flavors, pools),
    )
    return WorkerRead(view, serves, blocked, worker_devices, catalogue, trees)


async def _read_node_pools(api: KubeApi) -> list[Obj]:
    """Its Karpenter NodePools, as the dispatcher follows them ([]: it runs no Karpenter, or
    we may not read them)."""
    if not await discovery.serves(api, R.NODE_POOLS):
        return []
    try:
        return list((await api.list(R.NODE_POOLS))["items"])
    except errors.Forbidden:
        return []


async def _read_topology(api: KubeApi, namespace: str) -> dict[str, TopologySnapshot]:
    """TAS: the worker shim's report of its racks, as the dispatcher reads it ({}: none)."""
    try:
        report = await api.get(R.CONFIGMAPS, TOPOLOGY_REPORT, namespace)
    except (errors.NotFound, errors.Forbidden):
        return {}
    return tas_summary.trees_of(report.get("data") or {})[0]


async def _read_devices(
    api: KubeApi,
) -> tuple[deviceinventory.WorkerDevices | None, dra.DeviceCatalogue | None]:
    """The objects the dispatcher's device informers follow, listed once, as placement and
    as a charge read them (None: the worker does not serve resource.k8s.io/v1)."""
    if not await discovery.serves(api, R.RESOURCE_SLICES):
        return None, None
    slices, claims, classes = await asyncio.gather(
        api.list(R.RESOURCE_SLICES), api.list(R.RESOURCE_CLAIMS), api.list(R.DEVICE_CLASSES)
    )
    catalogue = dra.DeviceCatalogue(
        {c["metadata"]["name"]: c for c in classes["items"]}, slices["items"]
    )
    return deviceinventory.worker_devices(
        slices["items"], claims["items"], classes["items"]
    ), catalogue


async def worker_kubeconfig(
    api: KubeApi, mk_cluster: Obj, namespace: str
) -> kubeconfig.CheckedKubeconfig:
    name = mk_cluster["metadata"]["name"]
    location = federated.kubeconfig_source(mk_cluster).secret
    if location is None:
        raise CliError(f"MultiKueueCluster {name} does not keep its kubeconfig in a Secret")
    secret = await api.get(R.SECRETS, location, namespace)
    try:
        return kubeconfig.check(kubeconfig.from_secret(secret))
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(f"{err.reason}: {err}") from None
