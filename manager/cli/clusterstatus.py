"""What kfed shows of registered workers: waiting for a new one's ``Active`` condition (and
the words for it), a worker's capacity as its ClusterQueues give it, and the list of
registered workers with the MultiKueueConfigs they are in."""

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import at, items
from manager.cli.common import CliError, from_kube_error
from manager.cli.kubeconfigs import connect_dict
from manager.cli.tables import amount
from manager.controllers import conditions
from manager.federation.decisions import capacity
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


def active_condition(mk_cluster: Mapping[str, Any]) -> Obj | None:
    return conditions.find(at(mk_cluster, "status").get("conditions"), C.ACTIVE)


def describe_active(condition: Mapping[str, Any] | None) -> str:
    if condition is None:
        return "no Active condition yet (is the kfed manager running on the manager cluster?)"
    return (
        f"Active={condition.get('status', 'Unknown')} "
        f"{condition.get('reason') or ''}: {shown_message(condition)}"
    ).strip()


def shown_message(condition: Mapping[str, Any]) -> str:
    """A condition's message as the CLI shows it: any server URL in it without userinfo,
    query string or fragment (a condition written by an older manager may hold one)."""
    return kubeconfig.redact_text(str(condition.get("message") or ""))


async def wait_active(
    api: KubeApi,
    name: str,
    *,
    timeout: float,
    interval: float = 0.5,
    on_update: Callable[[str], None] | None = None,
) -> Obj:
    """Poll the MultiKueueCluster until Active=True; on timeout, fail with its condition."""
    deadline = time.monotonic() + timeout
    condition: Obj | None = None
    while True:
        obj = await api.get(R.MULTIKUEUE_CLUSTERS, name)
        condition = active_condition(obj)
        if condition is not None and condition.get("status") == "True":
            return condition
        if on_update is not None:
            on_update(describe_active(condition))
        if time.monotonic() >= deadline:
            raise CliError(
                f"{name} is not Active after {timeout:g}s: {describe_active(condition)}; "
                "the kfed manager's log says more"
            )
        await asyncio.sleep(interval)


# -- capacity of a worker --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapacityRow:
    cluster_queue: str
    flavor: str
    resource: str
    nominal: str
    reserved: str
    free: str


def capacity_rows(cluster_queues: list[Obj]) -> list[CapacityRow]:
    """Nominal, reserved and free quota per (ClusterQueue, flavor, resource), from the
    ClusterQueues' spec and ``status.flavorsReservation`` (as the manager reads them)."""
    rows = []
    for cq in sorted(cluster_queues, key=lambda c: str(c["metadata"]["name"])):
        for line in capacity.quota_lines(str(cq["metadata"]["name"]), cq):
            rows.append(
                CapacityRow(
                    line.cluster_queue,
                    line.flavor,
                    line.resource,
                    amount(line.resource, line.nominal),
                    amount(line.resource, line.reserved),
                    amount(line.resource, line.available),
                )
            )
    return rows


async def worker_capacity(name: str, checked: kubeconfig.CheckedKubeconfig) -> list[CapacityRow]:
    """Read the worker's ClusterQueues with its own kubeconfig (from where the CLI runs)."""
    api = await connect_dict(checked.config, checked.context, name=name)
    try:
        return capacity_rows((await api.list(R.CLUSTER_QUEUES))["items"])
    except errors.KubeError as err:
        raise from_kube_error(err, f"worker {name}") from None
    finally:
        await api.close()


# -- list ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterRow:
    name: str
    active: str
    reason: str
    maintenance: str
    configs: str
    message: str


def cluster_rows(mk_clusters: list[Obj], mk_configs: list[Obj]) -> list[ClusterRow]:
    member_of: dict[str, list[str]] = {}
    for config in sorted(mk_configs, key=lambda c: str(c["metadata"]["name"])):
        for cluster in items(config, "spec", "clusters"):
            member_of.setdefault(str(cluster), []).append(str(config["metadata"]["name"]))
    rows = []
    for obj in sorted(mk_clusters, key=lambda c: str(c["metadata"]["name"])):
        name = str(obj["metadata"]["name"])
        condition = active_condition(obj) or {}
        rows.append(
            ClusterRow(
                name=name,
                active=str(condition.get("status", "Unknown")),
                reason=str(condition.get("reason", "")),
                maintenance=federated.maintenance_of(obj),
                configs=",".join(member_of.get(name, [])),
                message=shown_message(condition),
            )
        )
    return rows


async def list_clusters(api: KubeApi) -> list[ClusterRow]:
    clusters = (await api.list(R.MULTIKUEUE_CLUSTERS))["items"]
    configs = (await api.list(R.MULTIKUEUE_CONFIGS))["items"]
    return cluster_rows(clusters, configs)
