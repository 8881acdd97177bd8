"""Submitting Jobs to the manager and following each until it is placed on a worker.

A submitted Job gets a Workload on the manager (named after the Job and its UID); the
workload reserves quota in the global queue, then the MultiKueue admission check on it turns
Ready once a worker has admitted the copy sent there, and ``status.clusterName`` says which
worker that is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import at
from manager.cli.common import CliError, usage_error
from manager.cli.jobfiles import display_name, kind_of, queue_of
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


async def check_queues(api: KubeApi, prepared: list[Obj]) -> None:
    """Every Job's LocalQueue must exist before the Job: the manager decides at creation
    whether a Job is federated (``spec.managedBy``), so a Job created before its queue would
    later run on the manager itself."""
    for job in prepared:
        namespace, queue = job["metadata"]["namespace"], queue_of(job)
        try:
            await api.get(R.LOCAL_QUEUES, str(queue), namespace)
        except errors.NotFound:
            raise usage_error(
                f"LocalQueue {namespace}/{queue} not found on the manager: create it before "
                f"submitting {display_name(job)} (see `kubectl get localqueues -n "
                f"{namespace}`)"
            ) from None


async def create_jobs(api: KubeApi, prepared: list[Obj]) -> list[Obj]:
    created = []
    for job in prepared:
        try:
            kind = kind_of(job) or BATCH_JOB
            created.append(await api.create(kind.resource, job, job["metadata"]["namespace"]))
        except errors.AlreadyExists:
            raise CliError(
                f"{display_name(job)} already exists on the manager: delete it or change "
                "metadata.name"
            ) from None
    return created


async def multikueue_checks(api: KubeApi) -> set[str]:
    """Names of the AdmissionChecks the MultiKueue controller (kfed) handles."""
    return {
        str(ac["metadata"]["name"])
        for ac in (await api.list(R.ADMISSION_CHECKS))["items"]
        if federated.is_multikueue_check(ac)
    }


@dataclass(frozen=True, slots=True)
class Placement:
    job: str
    """``namespace/name`` of the Job."""
    done: bool
    cluster: str | None
    text: str
    """Where it went, or why it still waits."""


def placement(job: Obj, workload: Obj | None, mk_checks: set[str]) -> Placement:
    """How far a submitted Job has come, from its manager Workload."""
    key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
    if workload is None:
        return Placement(
            key, False, None, "no Workload yet (is the kfed manager running on the manager?)"
        )
    status = ws.status_of(workload)
    cluster = status.get("clusterName") or None
    if ws.is_finished(workload):
        finished = conditions.find(status.get("conditions"), C.FINISHED) or {}
        where = f" on {cluster}" if cluster else ""
        return Placement(
            key, True, cluster, f"finished{where}: {finished.get('message') or 'done'}"
        )
    checks = [c for c in status.get("admissionChecks") or [] if c.get("name") in mk_checks]
    if ws.has_reservation(workload):
        cq = at(workload, "status", "admission").get("clusterQueue", "")
        if checks:
            check = checks[0]
            if check.get("state") == "Ready" and cluster:
                return Placement(key, True, cluster, f"placed on {cluster}")
            message = check.get("message") or "waiting for a worker"
            return Placement(
                key,
                False,
                None,
                f"quota reserved in {cq}; MultiKueue check {check.get('state', 'Pending')}: "
                f"{message}",
            )
        if ws.is_admitted(workload):
            return Placement(
                key,
                True,
                None,
                f"admitted in {cq} on the manager (its ClusterQueue has no "
                "MultiKueue admission check, so it is not federated)",
            )
        return Placement(key, False, None, f"quota reserved in {cq}; waiting for admission checks")
    if ws.is_evicted(workload):
        evicted = conditions.find(status.get("conditions"), C.EVICTED) or {}
        return Placement(key, False, None, f"evicted: {evicted.get('message', '')}; requeued")
    reserved = conditions.find(status.get("conditions"), C.QUOTA_RESERVED)
    if reserved is not None and reserved.get("message"):
        return Placement(key, False, None, f"pending: {reserved['message']}")
    return Placement(key, False, None, "pending: waiting for quota in its ClusterQueue")


async def workload_of(api: KubeApi, job: Obj) -> Obj | None:
    """The manager Workload of a Job: by its derived name, else by the job-uid label."""
    namespace, name = (kind_of(job) or BATCH_JOB).workload_key(job).split("/", 1)
    try:
        return await api.get(R.WORKLOADS, name, namespace)
    except errors.NotFound:
        pass
    uid = job["metadata"].get("uid")
    if not uid:
        return None
    found = (await api.list(R.WORKLOADS, namespace, label_selector=f"{C.JOB_UID_LABEL}={uid}"))[
        "items"
    ]
    return found[0] if found else None


async def wait_placed(
    api: KubeApi,
    created: list[Obj],
    *,
    timeout: float,
    interval: float = 0.5,
    on_update: Callable[[list[Placement]], None] | None = None,
) -> tuple[list[Placement], bool]:
    """Follow every Job until placed (or finished); returns the last placements and whether
    all of them are done (False: the timeout passed)."""
    mk_checks = await multikueue_checks(api)
    deadline = time.monotonic() + timeout
    while True:
        states = [placement(job, await workload_of(api, job), mk_checks) for job in created]
        if on_update is not None:
            on_update(states)
        if all(p.done for p in states):
            return states, True
        if time.monotonic() >= deadline:
            return states, False
        await asyncio.sleep(interval)
