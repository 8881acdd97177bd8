"""The manager's admission state, read with one LIST of each kind and converted exactly as the
manager's controllers convert their informer caches, so that a private admission core built
from it answers as the manager's own would. Nothing is written: every core built here lives
and dies in this process.

A Workload holds quota from its reservation (``QuotaReserved`` with ``status.admission``)
until it finishes, is deleted or its reservation is released, as the Workload controller
accounts it; workloads still pending are left out (``kfed whatif`` asks about one Job alone).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic

from manager import core
from manager.api import federated
from manager.api.clusterqueue import ClusterQueue
from manager.api.cohort import Cohort
from manager.api.localqueue import LocalQueue
from manager.api.resourceflavor import ResourceFlavor
from manager.api.view import at, labels_of
from manager.api.workload import Workload
from manager.controllers import convert
from manager.controllers import workloadstatus as ws
from manager.controllers.workloads import priority_of
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]
T = TypeVar("T")

UNUSABLE = (pydantic.ValidationError, ValueError, KeyError)
"""What makes the controllers skip an object (reported, never fatal): the same here."""


@dataclass(frozen=True, slots=True)
class Held:
    """A workload holding quota, as the Workload controller hands it to the core."""

    workload: core.Workload
    admission: core.Admission
    reserved_at: float
    admitted: bool


@dataclass(frozen=True)
class Snapshot:
    flavors: tuple[core.ResourceFlavor, ...]
    cluster_queues: Mapping[str, core.ClusterQueue]
    cohorts: tuple[core.Cohort, ...]
    local_queues: Mapping[str, core.LocalQueue]
    """By ``namespace/name``."""
    namespaces: Mapping[str, Mapping[str, str]]
    """Namespace -> its labels (ClusterQueues' namespaceSelectors)."""
    held: tuple[Held, ...]
    priority_classes: Mapping[str, int]
    """WorkloadPriorityClass -> value."""
    flavor_objects: Mapping[str, Obj]
    """The ResourceFlavors as read, by name (the dispatcher's evaluation reads them so)."""
    invalid: Mapping[str, str]
    """``Kind/key`` -> why the manager's controllers cannot use that object either."""

    def priority_class_value(self, name: str) -> int | None:
        return self.priority_classes.get(name)

    def admission_core(
        self,
        *,
        idle: bool = False,
        without: Collection[str] = (),
        cluster_queue: core.ClusterQueue | None = None,
    ) -> core.AdmissionCore:
        """A fresh core fed with the snapshot. ``idle``: no workload holds quota; ``without``:
        these workloads (keys) do not; ``cluster_queue`` replaces the ClusterQueue of its
        name."""
        admission_core = core.AdmissionCore()
        for flavor in self.flavors:
            admission_core.upsert_flavor(flavor)
        for cohort in self.cohorts:
            admission_core.upsert_cohort(cohort)
        for cq in self.cluster_queues.values():
            if cluster_queue is not None and cq.name == cluster_queue.name:
                cq = cluster_queue
            admission_core.upsert_cluster_queue(cq)
        for lq in self.local_queues.values():
            admission_core.upsert_local_queue(lq)
        for namespace, labels in self.namespaces.items():
            admission_core.set_namespace_labels(core.Namespace(namespace), labels)
        for held in () if idle else self.held:
            if held.workload.key not in without:
                admission_core.add_admitted(
                    held.workload,
                    held.admission,
                    reserved_at=held.reserved_at,
                    admitted=held.admitted,
                )
        return admission_core


def _key(obj: Obj) -> str:
    meta = at(obj, "metadata")
    namespace, name = meta.get("namespace"), str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def unusable_reason(err: Exception) -> str:
    """One line on why an object cannot be converted (its first validation error)."""
    if isinstance(err, pydantic.ValidationError):
        first = err.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _converted(
    kind: str, items: Iterable[Obj], to_core: Callable[[Obj], T], invalid: dict[str, str]
) -> list[tuple[Obj, T]]:
    result = []
    for obj in items:
        try:
            result.append((obj, to_core(obj)))
        except UNUSABLE as err:
            invalid[f"{kind}/{_key(obj)}"] = unusable_reason(err)
    return result


def _holds_quota(obj: Obj) -> bool:
    """The Workload controller releases a finished or deleted workload's quota at once."""
    return (
        ws.has_reservation(obj)
        and not ws.is_finished(obj)
        and not at(obj, "metadata").get("deletionTimestamp")
    )


def from_objects(
    *,
    flavors: Iterable[Obj] = (),
    cluster_queues: Iterable[Obj] = (),
    cohorts: Iterable[Obj] = (),
    local_queues: Iterable[Obj] = (),
    namespaces: Iterable[Obj] = (),
    workloads: Iterable[Obj] = (),
    priority_classes: Iterable[Obj] = (),
    admission_checks: Iterable[Obj] = (),
    now: float,
) -> Snapshot:
    """The snapshot of these API objects (dicts as the API server returns them)."""
    invalid: dict[str, str] = {}
    checks = {_key(obj): obj for obj in admission_checks}

    def cluster_queue(obj: Obj) -> core.ClusterQueue:
        # As ClusterState feeds a ClusterQueue: converted, plus MultiKueue misconfigurations.
        return dataclasses.replace(
            convert.cluster_queue(ClusterQueue.model_validate(obj)),
            configuration_problem=federated.configuration_problem(obj, checks.get),
            # A TAS pod set of a MultiKueue queue is placed on the worker, not here.
            check_controllers=federated.check_controllers(obj, checks.get),
        )

    wpcs = {_key(obj): int(obj["value"]) for obj in priority_classes if "value" in obj}

    def held(obj: Obj) -> Held:
        model = Workload.model_validate(obj)
        return Held(
            convert.workload(
                model, priority=priority_of(model, wpcs.get), creation_time=ws.creation_time(obj)
            ),
            convert.admission_from_status(ws.status_of(obj)["admission"]),
            reserved_at=ws.reservation_time(obj) or now,
            admitted=ws.is_admitted(obj),
        )

    rfs = _converted(
        "ResourceFlavor",
        flavors,
        lambda o: convert.flavor(ResourceFlavor.model_validate(o)),
        invalid,
    )
    return Snapshot(
        flavors=tuple(f for _, f in rfs),
        cluster_queues={
            cq.name: cq
            for _, cq in _converted("ClusterQueue", cluster_queues, cluster_queue, invalid)
        },
        cohorts=tuple(
            c
            for _, c in _converted(
                "Cohort", cohorts, lambda o: convert.cohort(Cohort.model_validate(o)), invalid
            )
        ),
        local_queues={
            lq.key: lq
            for _, lq in _converted(
                "LocalQueue",
                local_queues,
                lambda o: convert.local_queue(LocalQueue.model_validate(o)),
                invalid,
            )
        },
        namespaces={_key(ns): dict(labels_of(ns)) for ns in namespaces},
        held=tuple(
            h for _, h in _converted("Workload", filter(_holds_quota, workloads), held, invalid)
        ),
        priority_classes=wpcs,
        flavor_objects={str(f.name): obj for obj, f in rfs},
        invalid=invalid,
    )


async def read(api: KubeApi, *, now: float) -> Snapshot:
    """The manager's snapshot: one LIST of each kind the admission core is fed from."""
    kinds = {
        "flavors": R.RESOURCE_FLAVORS,
        "cluster_queues": R.CLUSTER_QUEUES,
        "cohorts": R.COHORTS,
        "local_queues": R.LOCAL_QUEUES,
        "namespaces": R.NAMESPACES,
        "workloads": R.WORKLOADS,
        "priority_classes": R.WORKLOAD_PRIORITY_CLASSES,
        "admission_checks": R.ADMISSION_CHECKS,
    }
    lists = await asyncio.gather(*(api.list(res) for res in kinds.values()))
    return from_objects(
        **{name: listed["items"] for name, listed in zip(kinds, lists, strict=True)}, now=now
    )
