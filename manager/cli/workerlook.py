"""One worker as ``kfed whatif`` sees it: the dispatcher's own eligibility rule on facts read
from the manager's MultiKueueCluster and from the worker, then its verdict (quota, devices,
racks) as the dispatcher gives it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import at
from manager.cli.common import CliError
from manager.cli.workerread import WorkerRead, read_worker, worker_kubeconfig
from manager.controllers import conditions
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.federation.decisions import (
    capacity,
    deviceneed,
    devices,
    eligibility,
    references,
    topology,
)
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkerLook:
    """One worker as ``kfed whatif`` sees it: why no copy may go there (None: one may), and
    what it holds when it could be read (its queues count for the flavors each worker offers
    together even where no copy may go now, as in the manager)."""

    refused: capacity.Candidate | None
    read: WorkerRead | None


async def evaluate_worker(
    api: KubeApi,
    name: str,
    order: int,
    *,
    request: capacity.Request,
    manager_flavors: Mapping[str, Obj],
    namespace: str,
    allowed: set[str] | None,
    used: frozenset[references.Reference] = frozenset(),
    kind: JobKind = BATCH_JOB,
    job_name: str = "",
    need: deviceneed.Need | None = None,
) -> capacity.Candidate:
    """One worker's verdict: ``look_at_worker``, then capacity.evaluate on its queues (and
    its devices, for a job that claims some)."""
    looked = await look_at_worker(
        api,
        name,
        order,
        job_namespace=request.namespace,
        namespace=namespace,
        allowed=allowed,
        used=used,
        kind=kind,
        job_name=job_name,
        with_devices=bool(need),
    )
    return verdict_of(looked, request, manager_flavors, need)


def verdict_of(
    looked: WorkerLook,
    request: capacity.Request,
    manager_flavors: Mapping[str, Obj],
    need: deviceneed.Need | None = None,
    tas_need: topology.Need | None = None,
) -> capacity.Candidate:
    """The dispatcher's verdict: quota (``capacity.evaluate``), then devices
    (``devices.evaluate``) for a job that claims some, then the racks (``topology.evaluate``)
    for one placed by topology."""
    if looked.refused is not None:
        return looked.refused
    assert looked.read is not None  # a worker not refused was read
    candidate = capacity.evaluate(looked.read.view, request, manager_flavors)
    if need:
        read = looked.read
        candidate = devices.evaluate(candidate, read.devices, need, serves=read.devices is not None)
    if tas_need:
        candidate = topology.evaluate(candidate, looked.read.topology, tas_need)
    return candidate


async def look_at_worker(
    api: KubeApi,
    name: str,
    order: int,
    *,
    job_namespace: str,
    namespace: str,
    allowed: set[str] | None,
    used: frozenset[references.Reference] = frozenset(),
    kind: JobKind = BATCH_JOB,
    job_name: str = "",
    with_devices: bool = False,
) -> WorkerLook:
    """The dispatcher's own eligibility rule (``eligibility.refusal``) on facts read here: the
    MultiKueueCluster, then the worker itself (read whenever it can be)."""
    facts = await _manager_side_facts(api, name, job_namespace, allowed, used, kind)
    if not facts.registered or not facts.connected:
        # Not read: the manager cannot reach it either (and a read might hang until timeout).
        return WorkerLook(eligibility.refusal(facts), None)
    unreadable: capacity.Candidate | None = None
    read: WorkerRead | None = None
    try:
        mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, name)
        checked = await worker_kubeconfig(api, mk_cluster, namespace)
        read = await read_worker(
            name, order, checked, job_namespace, kind, job_name, with_devices, namespace
        )
    except CliError as err:
        unreadable = capacity.Candidate(name, False, f"cannot be read from here: {err.message}")
    except (errors.KubeError, OSError) as err:
        unreadable = capacity.Candidate(name, False, f"cannot be read from here: {err}")
    if read is not None:
        facts = replace(facts, serves_kind=read.serves_kind, blocked=read.blocked)
    return WorkerLook(eligibility.refusal(facts) or unreadable, read)


async def _manager_side_facts(
    api: KubeApi,
    name: str,
    job_namespace: str,
    allowed: set[str] | None,
    used: frozenset[references.Reference],
    kind: JobKind,
) -> eligibility.WorkerEligibility:
    """Eligibility as far as the manager's objects tell it (the worker's own facts are
    assumed fine until read)."""
    res = kind.resource
    base = eligibility.WorkerEligibility(
        name=name,
        allowed=allowed is None or name in allowed,
        namespace=job_namespace,
        kind=f"{res.kind} ({res.api_version})",
    )
    try:
        mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, name)
    except errors.NotFound:
        return replace(base, registered=False)
    active = conditions.find(at(mk_cluster, "status").get("conditions"), C.ACTIVE)
    connected = active is not None and active.get("status") == "True"
    detail = (
        f"{active.get('reason', '')}: {active.get('message', '')}"
        if active
        else "no Active condition (is the kfed manager running?)"
    )
    return replace(
        base,
        namespace_bound=federated.namespace_bound(mk_cluster, job_namespace),
        references_refusal=references.refusal(
            references.policy_of(mk_cluster), used, namespace=job_namespace, worker=name
        ),
        connected=connected,
        not_connected_detail="" if connected else detail,
        maintenance=federated.maintenance_of(mk_cluster),
    )
