"""What one cluster's controllers know: informers on every kind they read, and the admission
core fed from them.

Configuration objects (flavors, queues, cohorts, namespaces) go straight into the core from
the informer handlers; a bad object is reported and skipped, never fatal. Workloads and Jobs
go through work queues (see workloads.py and jobs.py), since acting on them writes to the API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pydantic

from manager import core
from manager.api import federated
from manager.api.clusterqueue import ClusterQueue
from manager.api.cohort import Cohort
from manager.api.localqueue import LocalQueue
from manager.api.resourceflavor import ResourceFlavor
from manager.api.tasprovisioning import Topology
from manager.api.view import at, labels_of
from manager.controllers import convert, ignored
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.informers import JobInformers
from manager.controllers.topologyfeed import TopologyFeed
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.events import EventRecorder
from manager.kube.informer import Event, Informer
from manager.telemetry.metrics import Metrics

log = logging.getLogger(__name__)


Colocation = Callable[[Obj], tuple[frozenset[core.FlavorName], ...]]
"""A ClusterQueue (as stored) -> the sets of its flavors one place offers together (see
``core.ClusterQueue.colocated_flavors``); ``()``: no such constraint (one cluster)."""


def no_colocation(_: Obj) -> tuple[frozenset[core.FlavorName], ...]:
    return ()


def only_status_changed(old: Obj | None, new: Obj) -> bool:
    """``new`` differs from ``old`` in its status (and resourceVersion) at most."""
    if old is None or old.get("spec") != new.get("spec"):
        return False
    old_meta, new_meta = at(old, "metadata"), at(new, "metadata")
    if old_meta.keys() != new_meta.keys():
        return False
    return all(v == old_meta[k] for k, v in new_meta.items() if k != "resourceVersion")


class ClusterState:
    def __init__(
        self,
        api: KubeApi,
        *,
        watch_timeout: int = 290,
        metrics: Metrics | None = None,
        fair_sharing: core.FairSharingConfig | None = None,
        topology_aware: bool = False,
        unadmitted_workloads_observability: bool = False,
    ) -> None:
        self.api = api
        self.unadmitted_workloads_observability = unadmitted_workloads_observability
        """Upstream v0.19's finer pending reasons and unadmitted-workload gauges
        (``ControllerSettings.unadmitted_workloads_observability``)."""
        self.metrics = metrics if metrics is not None else Metrics()
        """Where this cluster's controllers record (one registry per process object)."""
        self.events = EventRecorder(None, component="kfed")
        """Kubernetes Events about this cluster's objects; silent until the controllers that
        run here give it a writer (``ClusterController``)."""
        self.core = core.AdmissionCore(fair_sharing=fair_sharing)
        self.changed = asyncio.Event()
        """Set whenever something could let a pending workload in: the scheduler waits on it."""
        self.invalid: dict[str, str] = {}
        """Objects the core could not take, keyed ``Kind/key``, with the reason (for status)."""

        def informer(res: R.Resource) -> Informer:
            return Informer(api, res, watch_timeout=watch_timeout)

        self.flavors = informer(R.RESOURCE_FLAVORS)
        self.cluster_queues = informer(R.CLUSTER_QUEUES)
        self.local_queues = informer(R.LOCAL_QUEUES)
        self.cohorts = informer(R.COHORTS)
        self.namespaces = informer(R.NAMESPACES)
        self.priority_classes = informer(R.WORKLOAD_PRIORITY_CLASSES)
        self.admission_checks = informer(R.ADMISSION_CHECKS)
        self.workloads = informer(R.WORKLOADS)
        self.jobs = informer(R.JOBS)
        self.job_kinds = JobInformers()
        """Every kind of job queued here, with its informer (``add_job_kind``)."""
        self.job_kinds.add(BATCH_JOB, self.jobs)
        self._watch_timeout = watch_timeout
        self.colocation: Colocation = no_colocation

        self.flavors.subscribe(self._feed(ResourceFlavor, convert.flavor, "flavor"))
        self.cluster_queues.subscribe(
            self._feed(ClusterQueue, self._cluster_queue_to_core, "cluster_queue")
        )
        self.cluster_queues.subscribe(self._tell_ignored(ignored.cluster_queue_notes))
        self.flavors.subscribe(self._tell_ignored(ignored.flavor_notes))
        self.admission_checks.subscribe(self._on_admission_check)
        self.local_queues.subscribe(self._feed(LocalQueue, convert.local_queue, "local_queue"))
        self.cohorts.subscribe(self._feed(Cohort, convert.cohort, "cohort"))
        self.namespaces.subscribe(self._on_namespace)
        self.topology_informers: list[Informer] = []
        """Topologies, Nodes and Pods, when pods are placed by topology here (TAS)."""
        self.pods: Informer | None = None
        """Every Pod of the cluster, when pods are placed by topology here."""
        if topology_aware:
            self.topology_feed = TopologyFeed(self.core, self.kick)
            for resource, handler in (
                (R.of(Topology.resource), self.topology_feed.on_topology),
                (R.NODES, self.topology_feed.on_node),
                (R.PODS, self.topology_feed.on_pod),
            ):
                watched = informer(resource)
                watched.subscribe(handler)
                self.topology_informers.append(watched)
            self.pods = self.topology_informers[-1]

    @property
    def informers(self) -> list[Informer]:
        return [
            self.flavors,
            self.cluster_queues,
            self.local_queues,
            self.cohorts,
            self.namespaces,
            self.priority_classes,
            self.admission_checks,
            self.workloads,
            *self.job_kinds.values(),
            *self.topology_informers,
        ]

    def add_job_kind(self, kind: JobKind) -> Informer:
        """Queue jobs of this kind too (its CRD is served); returns its informer, which the
        caller runs."""
        if kind not in self.job_kinds:
            self.job_kinds.add(
                kind,
                Informer(
                    self.api,
                    kind.resource,
                    label_selector=kind.informer_selector,
                    watch_timeout=self._watch_timeout,
                ),
            )
        return self.job_kinds[kind]

    def job_of(self, workload: Obj) -> tuple[JobKind, Obj | None] | None:
        """The kind of the job that owns this Workload, and that job (None: not seen, or
        gone); None when no job of a queued kind owns it."""
        for kind, informer in self.job_kinds.items():
            key = kind.owner_of(workload)
            if key is not None:
                return kind, informer.get(key)
        return None

    def kick(self) -> None:
        self.changed.set()

    def _feed(
        self, model: type[Any], to_core: Callable[[Any], Any], kind: str
    ) -> Callable[[Event], None]:
        upsert = getattr(self.core, f"upsert_{kind}")
        delete = getattr(self.core, f"delete_{kind}")
        label = model.__name__

        def handle(event: Event) -> None:
            if event.type != "DELETED" and only_status_changed(event.old, event.obj):
                # The core reads none of a status: these are mostly its own usage coming back
                # (every queue status write), and feeding them again cost a model round trip
                # and a scheduling cycle each (issue #36's profile under upstream's runner).
                return
            if event.type == "DELETED":
                delete(core.LocalQueueKey(event.key) if kind == "local_queue" else event.key)
                self.invalid.pop(f"{label}/{event.key}", None)
            else:
                try:
                    upsert(to_core(model.model_validate(event.obj)))
                    self.invalid.pop(f"{label}/{event.key}", None)
                except (pydantic.ValidationError, ValueError, KeyError) as err:
                    self.invalid[f"{label}/{event.key}"] = one_line(err)
                    log.warning("%s %s is not usable: %s", label, event.key, one_line(err))
            self.kick()

        return handle

    def _tell_ignored(
        self, notes_of: Callable[[Obj], list[tuple[str, str]]]
    ) -> Callable[[Event], None]:
        """A handler telling, once per object (and again if those fields change), the
        fields of it kfed stores but ignores (``ignored.py``)."""

        def tell(event: Event) -> None:
            if event.type == "DELETED":
                return
            notes = notes_of(event.obj)
            if event.old is not None and notes_of(event.old) == notes:
                return
            for reason, message in notes:
                self.events.warning(event.obj, reason, message)

        return tell

    def _cluster_queue_to_core(self, cq: ClusterQueue) -> core.ClusterQueue:
        wire = cq.to_wire()
        return dataclasses.replace(
            convert.cluster_queue(cq),
            configuration_problem=self.multikueue_problem(wire),
            check_controllers=federated.check_controllers(wire, self.admission_checks.get),
            colocated_flavors=self.colocation(wire),
        )

    def set_colocation(self, colocation: Colocation) -> None:
        """Give the core the flavors each place can hold together (kfed's manager: what each
        worker offers, ``federation/colocation.py``), and feed the ClusterQueues again."""
        self.colocation = colocation
        self.refeed_cluster_queues()

    def refeed_cluster_queues(self, names: Iterable[str] | None = None) -> None:
        """Feed ClusterQueues (all, or ``names``) to the core again: something outside their
        objects that the core reads about them changed. Unchanged ones cost a comparison."""
        feed = self._feed(ClusterQueue, self._cluster_queue_to_core, "cluster_queue")
        wanted = None if names is None else set(names)
        for cq in self.cluster_queues.items():
            if wanted is None or cq["metadata"]["name"] in wanted:
                feed(Event("MODIFIED", cq["metadata"]["name"], cq))

    def multikueue_problem(self, wire: Obj) -> tuple[str, str] | None:
        """Upstream's MultiKueue misconfigurations of a ClusterQueue (its object as read and
        validated; ``api/federated.py``)."""
        return federated.configuration_problem(wire, self.admission_checks.get)

    def _on_admission_check(self, event: Event) -> None:
        """A check's controller decides whether the ClusterQueues naming it are well made, and
        which workloads they may admit: feed them again (AdmissionChecks are few and rarely
        change)."""
        self.refeed_cluster_queues(
            cq["metadata"]["name"]
            for cq in self.cluster_queues.items()
            if event.key in federated.check_names(cq)
        )

    def _on_namespace(self, event: Event) -> None:
        name = core.Namespace(event.key)
        if event.type == "DELETED":
            self.core.delete_namespace(name)
        else:
            self.core.set_namespace_labels(name, labels_of(event.obj))
        self.kick()

    # -- lookups used by the controllers -------------------------------------------------

    def cluster_queue_of(self, namespace: str, queue_name: str) -> Obj | None:
        lq = self.local_queues.get(f"{namespace}/{queue_name}")
        if lq is None:
            return None
        return self.cluster_queues.get(str(at(lq, "spec").get("clusterQueue", "")))

    def queued_cluster_queue(self, workload: Obj) -> str:
        """The ClusterQueue a workload is in: the one holding its quota
        (``workloadstatus.cluster_queue_of``), else the one its LocalQueue points to now;
        empty when neither is known."""
        reserved = ws.cluster_queue_of(workload)
        if reserved:
            return reserved
        meta, spec = at(workload, "metadata"), at(workload, "spec")
        lq = self.local_queues.get(f"{meta.get('namespace')}/{spec.get('queueName') or ''}")
        return str(at(lq, "spec").get("clusterQueue") or "")

    def admission_check_names(self, cluster_queue: str) -> list[str]:
        """The checks every workload of this ClusterQueue must pass (admissionChecksStrategy)."""
        return federated.check_names(self.cluster_queues.get(cluster_queue))

    def cohort_parents(self) -> dict[str, str]:
        """Cohort -> its parent cohort (``spec.parentName``), for the cohorts that name one."""
        parents = {}
        for obj in self.cohorts.items():
            parent = at(obj, "spec").get("parentName")
            if parent:
                parents[str(obj["metadata"]["name"])] = str(parent)
        return parents

    def cohorts_of(self, cluster_queue: str) -> tuple[str, ...]:
        """A ClusterQueue's cohort and that cohort's ancestors, nearest first, as the
        informers have them now (an admission counts for each subtree when it happens, not
        when metrics are next read)."""
        cohort = str(at(self.cluster_queues.get(cluster_queue), "spec").get("cohortName") or "")
        return cohort_path(cohort, self.cohort_parents()) if cohort else ()

    def priority_class_value(self, name: str) -> int | None:
        wpc = self.priority_classes.get(name)
        return int(wpc["value"]) if wpc is not None and "value" in wpc else None


def cohort_path(cohort: str, parents: Mapping[str, str]) -> tuple[str, ...]:
    """A cohort and its ancestors, nearest first (a cycle, which the core reports as
    invalid, is cut where it closes)."""
    path: list[str] = []
    node = cohort
    while node and node not in path:
        path.append(node)
        node = parents.get(node, "")
    return tuple(path)


def one_line(err: Exception) -> str:
    """The first validation error (or the first line of any other), for a reason field."""
    if isinstance(err, pydantic.ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']} ({err.error_count()} error(s))"
    return str(err).splitlines()[0] if str(err) else type(err).__name__
