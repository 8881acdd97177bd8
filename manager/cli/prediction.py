"""Where a Job would go now, computed the way the manager would, and changing nothing.

Two steps, as in the federation: the manager's own admission core decides, on a snapshot of
the manager, whether and with which flavors the Job would be admitted (``manageradmission``:
fits, borrows, preempts, waits or never); then the dispatcher evaluates every worker of the
queue's MultiKueueConfig with ``manager.federation.decisions.capacity`` and picks one by its scoring
rule. Workers are read with the kubeconfigs the manager holds in its Secrets, from where the
CLI runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from manager.api import constants as C
from manager.api import dra, federated
from manager.api.view import at, labels_of
from manager.cli import snapshot
from manager.cli.common import CliError, usage_error
from manager.cli.jobfiles import display_name, kind_of, namespace_of, queue_of
from manager.cli.kubeconfigs import connect_dict
from manager.cli.manageradmission import Outcome, decide, workload_of
from manager.cli.tables import amount
from manager.controllers import conditions, devicecatalogue, jobs, jobworkload
from manager.controllers.jobkinds.base import JobKind, MissingReference
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.core import tas_summary
from manager.core.tas import TopologySnapshot
from manager.federation.decisions import (
    capacity,
    colocation,
    devices,
    eligibility,
    references,
    topology,
)
from manager.federation.engine.lookups import foreign_reason
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, TOPOLOGY_REPORT
from manager.federation.workers import kubeconfig
from manager.kube import discovery, errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


# -- the federation as the manager sees it ----------------------------------------------------


@dataclass(frozen=True)
class QueueChain:
    """A LocalQueue and the ClusterQueue it points to, as far as they exist on the manager.
    Each caller words the missing link in its own terms (and exit code)."""

    local_queue: Obj | None
    cluster_queue_name: str
    cluster_queue: Obj | None


async def read_queue_chain(api: KubeApi, namespace: str, queue: str) -> QueueChain:
    try:
        lq = await api.get(R.LOCAL_QUEUES, queue, namespace)
    except errors.NotFound:
        return QueueChain(None, "", None)
    cq_name = str(at(lq, "spec").get("clusterQueue") or "")
    try:
        cq: Obj | None = await api.get(R.CLUSTER_QUEUES, cq_name)
    except errors.NotFound:
        cq = None
    return QueueChain(lq, cq_name, cq)


async def multikueue_config(api: KubeApi, cq: Obj) -> tuple[str, str, list[str]] | None:
    """(AdmissionCheck, MultiKueueConfig, its clusters) of a ClusterQueue; None when the
    queue has no MultiKueue check (its jobs run on the manager). The same answer as the
    manager's (``api/federated.py``), from one LIST of each kind."""
    checks = _by_key((await api.list(R.ADMISSION_CHECKS))["items"])
    configs = _by_key((await api.list(R.MULTIKUEUE_CONFIGS))["items"])
    found = federated.federation_of(cq, checks.get, configs.get)
    if found is None:
        return None
    return found.check, found.config, list(found.clusters)


def _by_key(items: list[Obj]) -> dict[str, Obj]:
    result = {}
    for obj in items:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        result[str(key)] = obj
    return result


@dataclass(frozen=True, slots=True)
class WorkerRead:
    """What one read of a worker tells: its queues, and the facts of eligibility that only the
    worker knows (it serves the job's kind; an object of the job's name is there already)."""

    view: capacity.WorkerView
    serves_kind: bool
    blocked: str | None
    devices: devices.WorkerDevices | None = None
    """Its devices as the dispatcher's informers hold them (None: it serves no DRA, or the
    job claims no devices and they were not read)."""
    catalogue: dra.DeviceCatalogue | None = None
    """Its DeviceClasses and ResourceSlices as a charge reads them (read with ``devices``)."""
    topology: Mapping[str, TopologySnapshot] | None = None
    """TAS: its shim's report (``kfed-topology``), worker flavor -> domain tree."""


async def _read_worker(
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
    finally:
        await api.close()
    view = capacity.WorkerView(
        name=name,
        local_queues=_by_key(lqs["items"]),
        cluster_queues=_by_key(cqs["items"]),
        flavors=_by_key(rfs["items"]),
        order=order,
    )
    return WorkerRead(view, serves, blocked, worker_devices, catalogue, trees)


async def _read_topology(api: KubeApi, namespace: str) -> dict[str, TopologySnapshot]:
    """TAS: the worker shim's report of its racks, as the dispatcher reads it ({}: none)."""
    try:
        report = await api.get(R.CONFIGMAPS, TOPOLOGY_REPORT, namespace)
    except (errors.NotFound, errors.Forbidden):
        return {}
    return tas_summary.trees_of(report.get("data") or {})[0]


async def _read_devices(
    api: KubeApi,
) -> tuple[devices.WorkerDevices | None, dra.DeviceCatalogue | None]:
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
    return devices.worker_devices(slices["items"], claims["items"], classes["items"]), catalogue


async def device_need(api: KubeApi, namespace: str, pod_sets: list[Obj]) -> devices.Need:
    """What each pod asks of a worker's devices, from the manager's ResourceClaimTemplates
    (as the dispatcher reads them when it places the workload)."""
    templates: dict[str, Obj] = {}
    for name in dra.template_names(pod_sets):
        with contextlib.suppress(errors.NotFound):
            templates[name] = await api.get(R.RESOURCE_CLAIM_TEMPLATES, name, namespace)
    return devices.need_of(pod_sets, templates)


async def _worker_kubeconfig(
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
    need: devices.Need | None = None,
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
    need: devices.Need | None = None,
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
        checked = await _worker_kubeconfig(api, mk_cluster, namespace)
        read = await _read_worker(
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


@dataclass(frozen=True, slots=True)
class Prediction:
    job: str
    queue: str
    cluster_queue: str
    requests: dict[str, str]
    manager_flavors: dict[str, str]
    manager_fits_now: bool
    """Quota reserved at once (within the queue's quota or borrowing)."""
    manager_notes: list[str]
    """Flavors the manager's core passed over, and why."""
    manager_outcome: str
    """fits, borrows, preempts or waits (``manageradmission.Outcome``)."""
    manager_reason: str
    """The core's words: the cohort it borrows from, or why it waits."""
    manager_victims: list[str]
    """Workloads the manager would preempt for it."""
    federated: bool
    device_charge: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per pod set, what one pod's devices are charged (``jobworkload.device_charge``): its DRA
    claims and the extended resources DRA devices serve, by the mapping."""
    admission_check: str = ""
    config: str = ""
    candidates: list[capacity.Candidate] = field(default_factory=list)
    chosen: str | None = None
    rule: str = capacity.RULE
    verdict: str = ""


def with_places(
    snap: snapshot.Snapshot, cq_name: str, cq: Obj, views: list[capacity.WorkerView]
) -> snapshot.Snapshot:
    """The snapshot with the ClusterQueue bound to the flavors each worker offers together
    (``federation/colocation.py``), as the manager's core has it."""
    held = snap.cluster_queues.get(cq_name)
    local_queues = [k for k, lq in snap.local_queues.items() if lq.cluster_queue == cq_name]
    found = colocation.places(cq, local_queues, views, snap.flavor_objects)
    if held is None or not found:
        return snap
    queues = {**snap.cluster_queues, cq_name: replace(held, colocated_flavors=found)}
    return replace(snap, cluster_queues=queues)


async def charge_of(
    api: KubeApi,
    job: Obj,
    pod_sets: list[Obj],
    mappings: dra.DeviceClassMappings,
    looks: list[WorkerLook],
) -> dra.Charge | dra.Refused | None:
    """What the job's devices would be charged, as the manager's job controller charges them
    (``jobworkload.device_charge``), with the DeviceClasses and ResourceSlices of the workers read
    here; CliError when the manager would not create its Workload yet."""
    found = devicecatalogue.merged(
        (w.read.view.name, w.read.catalogue)
        for w in looks
        if w.read is not None and w.read.catalogue is not None
    )

    async def catalogue(slices: bool) -> dra.DeviceCatalogue:
        return found

    charged = await jobworkload.device_charge(api, pod_sets, namespace_of(job), mappings, catalogue)
    if isinstance(charged, dra.TemplateMissing | dra.DevicesUnknown):
        raise CliError(
            f"the manager would not create the Workload of {display_name(job)} yet (it tries "
            f"again every {jobs.MISSING_REFERENCE_RETRY:.0f}s): {charged.message}"
        )
    return charged


async def predict(
    api: KubeApi,
    job: Obj,
    *,
    namespace: str,
    mappings: dra.DeviceClassMappings | None = None,
) -> Prediction:
    """Where ``job`` would go now; ``namespace`` is kfed's namespace (the Secrets);
    ``mappings``: the manager's ``deviceClassMappings``, to charge its devices as it does
    (None: none, as a manager without them)."""
    mappings = mappings or dra.DeviceClassMappings()
    job_ns, queue = namespace_of(job), queue_of(job)
    if not queue:
        raise usage_error(f"{display_name(job)} has no {C.QUEUE_NAME_LABEL} label: pass --queue")
    chain = await read_queue_chain(api, job_ns, queue)
    if chain.local_queue is None:
        raise CliError(
            f"LocalQueue {job_ns}/{queue} not found on the manager: the Job would never be "
            "admitted; create the LocalQueue first"
        )
    cq_name, cq = chain.cluster_queue_name, chain.cluster_queue
    if cq is None:
        raise CliError(
            f"LocalQueue {job_ns}/{queue} points to ClusterQueue {cq_name}, which does not "
            "exist on the manager: the Job would never be admitted"
        )
    now = time.time()
    snap = await snapshot.read(api, now=now)
    kind = kind_of(job) or BATCH_JOB
    try:
        resolved = await kind.with_references(job, api)
    except MissingReference as err:
        raise CliError(f"{display_name(job)} cannot be queued yet: {err}") from None
    federation = await multikueue_config(api, cq)
    annotations = at(job, "metadata").get("annotations") or {}
    allowed_raw = annotations.get(ALLOWED_CLUSTERS_ANNOTATION)
    allowed = {c.strip() for c in allowed_raw.split(",") if c.strip()} if allowed_raw else None
    clusters = federation[2] if federation is not None else []
    pod_sets = kind.workload_pod_sets(resolved)
    need = await device_need(api, job_ns, pod_sets)
    read_devices = bool(need) or dra.needs_catalogue(pod_sets, mappings)
    looks = list(
        await asyncio.gather(
            *(
                look_at_worker(
                    api,
                    name,
                    order,
                    job_namespace=job_ns,
                    namespace=namespace,
                    allowed=allowed,
                    used=references.of_objects(job_ns, (resolved,)),
                    kind=kind,
                    job_name=str(at(job, "metadata").get("name") or ""),
                    with_devices=read_devices,
                )
                for order, name in enumerate(clusters)
            )
        )
    )
    # As the manager does: the flavors each worker offers together bound the assignment.
    snap = with_places(snap, cq_name, cq, [w.read.view for w in looks if w.read is not None])
    charged = await charge_of(api, job, pod_sets, mappings, looks)
    workload = workload_of(resolved, snap, now=now, kind=kind, device_charge=charged)
    decision = decide(snap, workload, now=now)
    if decision.outcome is Outcome.NEVER:
        raise CliError(f"the manager would never admit {display_name(job)}: {decision.reason}")
    base = Prediction(
        job=display_name(job),
        queue=f"{job_ns}/{queue}",
        cluster_queue=cq_name,
        requests={r: amount(r, v) for (_, r), v in sorted(decision.usage.items())},
        manager_flavors=dict(sorted(decision.flavors.items())),
        manager_fits_now=decision.fits_now,
        manager_notes=list(decision.passed_over),
        manager_outcome=str(decision.outcome),
        manager_reason=decision.reason,
        manager_victims=list(decision.victims),
        federated=False,
        device_charge=(
            {ps: dict(res) for ps, res in charged.per_pod.items()}
            if isinstance(charged, dra.Charge)
            else {}
        ),
        verdict=f"runs on the manager: ClusterQueue {cq_name} has no MultiKueue check",
    )
    if federation is None:
        return base
    check, config, _ = federation
    request = capacity.Request(job_ns, queue, decision.usage)
    tas_need = topology.need_of_pod_sets(workload.pod_sets, decision.flavors)
    candidates = [verdict_of(w, request, snap.flavor_objects, need, tas_need) for w in looks]
    best = capacity.choose(candidates)
    if not clusters:
        verdict = f"would wait: MultiKueueConfig {config or '(none)'} lists no worker"
    elif best is None:
        verdict = (
            "would wait: no worker can ever admit it as configured (the manager gives its "
            "quota back after its --dispatch-deadline)"
            if capacity.never_placeable(candidates)
            else "would wait: no worker can admit it now"
        )
    else:
        verdict = f"would go to {best.cluster}: {best.reason}"
    if best is not None and decision.outcome is Outcome.PREEMPTS:
        verdict += f" (once the manager has preempted {len(decision.victims)} workload(s) for it)"
    elif best is not None and not decision.fits_now:
        verdict += " (once the manager's queue has quota for it)"
    return replace(
        base,
        federated=True,
        admission_check=check,
        config=config,
        candidates=candidates,
        chosen=best.cluster if best else None,
        verdict=verdict,
    )
