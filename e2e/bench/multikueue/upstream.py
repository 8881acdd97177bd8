"""Upstream Kueue (``cmd/kueue`` at the pinned version, the interop bed's build and launcher,
``e2e.local.upstream_kueue``) as the federation under test, in the same shape, generator and
recorder as kfed: upstream's CRDs on every lite control plane, upstream Kueue as the
MultiKueue manager (its default dispatcher, AllAtOnce) and as the Kueue of every worker, the
workers registered as upstream's runner registers them (a kubeconfig Secret, a
MultiKueueCluster each, one MultiKueueConfig, the check).

Upstream runs as its own manifests deploy it: the ``controller`` (reconciles at once per
kind: Workload and Job 5) and ``clientConnection`` (50 QPS, burst 100) settings of the
module's ``config/components/manager/controller_manager_config.yaml``, unless
``client_qps`` changes the latter for every Kueue of the run; its clients to the workers
stay at client-go's defaults (5 QPS, burst 10, per worker and per kind), which v0.17.0
offers no setting for.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

from e2e.bench.federation import topology
from e2e.bench.federation.bed import Bed, apply
from e2e.bench.multikueue import shape
from e2e.bench.multikueue.run import (
    NO_WAIT,
    Controllers,
    ModeResult,
    Quiet,
    measure,
    processes_of,
)
from e2e.local import upstream_kueue
from e2e.local.federation import MANAGER
from e2e.waiting import wait_for
from manager.controllers import conditions
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

MODE = "upstream-kueue"
"""The run's name in the report (and its namespace's suffix)."""


DEPLOYED_SETTINGS = ("controller", "clientConnection")
"""What the shipped configuration sets that changes how fast Kueue works (the rest is
where it listens, leader election and integrations, which the interop launcher sets)."""


def deployed_settings(manifest: str) -> dict[str, Any]:
    """The ``DEPLOYED_SETTINGS`` of upstream's shipped controller-manager configuration."""
    shipped = yaml.safe_load(manifest) or {}
    return {key: shipped[key] for key in DEPLOYED_SETTINGS if key in shipped}


def shipped_configuration() -> str:
    path = upstream_kueue.source() / "config" / "components" / "manager"
    return (path / "controller_manager_config.yaml").read_text()


@dataclass
class TunedKueue(upstream_kueue.UpstreamKueue):
    """The interop bed's upstream Kueue with the settings its manifests deploy it with."""

    deployed: dict[str, Any] = field(default_factory=dict)
    """``deployed_settings`` of the shipped configuration (empty: the binary's defaults)."""
    client_qps: float | None = None
    """``clientConnection.qps`` (a negative value turns upstream's limiter off); None:
    as deployed."""

    def configuration(self, *, health: int, metrics: int, webhook: int) -> dict[str, Any]:
        config = super().configuration(health=health, metrics=metrics, webhook=webhook)
        config.update(copy.deepcopy(self.deployed))
        if self.client_qps is not None:
            burst = max(1, round(self.client_qps * 1.5)) if self.client_qps > 0 else 1
            config["clientConnection"] = {"qps": self.client_qps, "burst": burst}
        return config


def new_bed(topo: topology.Topology) -> Bed:
    """Fresh lite control planes carrying upstream's CRDs instead of kfed's."""
    return Bed(topo, name=f"bench-mk-{MODE}", full=False, crds=upstream_kueue.install_crds)


async def _active(api: KubeApi, res: R.Resource, name: str, namespace: str | None = None) -> bool:
    try:
        found = await api.get(res, name, namespace)
    except errors.NotFound:
        return False
    return conditions.is_true(found, "Active")


async def wait_active(bed: Bed, namespace: str, *, timeout: float = 120) -> None:
    """Until upstream's manager sees every worker connected and its check, ClusterQueue and
    LocalQueue active (upstream's runner waits for the same before it generates)."""
    waits: list[tuple[R.Resource, str, str | None]] = [
        *((R.MULTIKUEUE_CLUSTERS, worker, None) for worker in bed.workers),
        (R.ADMISSION_CHECKS, topology.CHECK, None),
        (R.CLUSTER_QUEUES, shape.CLUSTER_QUEUE, None),
        (R.LOCAL_QUEUES, shape.LOCAL_QUEUE, namespace),
    ]
    for res, name, ns in waits:
        await wait_for(
            lambda r=res, n=name, s=ns: _active(bed.manager, r, n, s),  # type: ignore[misc]
            timeout=timeout,
            what=f"upstream Kueue: {res.plural} {name} Active on the manager",
            interval=0.2,
        )


async def run_upstream(
    bed: Bed,
    *,
    count: int,
    creators: int,
    timeout: float,
    client_qps: float | None = None,
    quiet: Quiet = NO_WAIT,
) -> ModeResult:
    """The bed is up (``new_bed``); starts upstream Kueue on every cluster, applies the
    shape's queues and the registration, and measures as ``run.run_mode`` does for kfed."""
    result = ModeResult(mode=MODE, workloads=count, creators=creators)
    namespace = shape.namespace_of(MODE)
    await bed.connect()
    try:
        deployed = deployed_settings(shipped_configuration())
        kueues = [TunedKueue(c, deployed=deployed, client_qps=client_qps) for c in bed.fed]
        for kueue in kueues:
            kueue.start()  # from the main thread: the process is tied to it
        for kueue in kueues:
            await asyncio.to_thread(kueue.wait_ready)
        for worker in bed.workers:
            await apply(bed.worker_apis[worker], shape.queues(namespace, count, check=False))
        await bed.register(via_proxies=False)
        await apply(bed.manager, shape.queues(namespace, count, check=True))
        await wait_active(bed, namespace)
        manager = bed.fed.cluster(MANAGER).processes[upstream_kueue.ROLE]
        controllers = Controllers(
            pids=processes_of(bed, None),
            alive=lambda: manager.alive,
            last_words=lambda: manager.log_tail(30),
        )
        await measure(bed, result, controllers, timeout=timeout, quiet=quiet)
    finally:
        await bed.close()
    return result
