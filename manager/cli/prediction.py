"""Where a Job would go now, computed the way the manager would, and changing nothing.

Two steps, as in the federation: the manager's own admission core decides, on a snapshot of
the manager, whether and with which flavors the Job would be admitted (``manageradmission``:
fits, borrows, preempts, waits or never); then the dispatcher evaluates every worker of the
queue's MultiKueueConfig with ``manager.federation.decisions.capacity`` and picks one by its scoring
rule. Workers are read with the kubeconfigs the manager holds in its Secrets, from where the
CLI runs.

The manager's side of the federation is read in queuechain.py, each worker in
workerread.py, and judged as the dispatcher judges it in workerlook.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any

from manager.api import constants as C
from manager.api import dra, draclaims
from manager.api.view import annotations_of, at
from manager.cli import snapshot
from manager.cli.common import CliError, usage_error
from manager.cli.jobfiles import display_name, kind_of, namespace_of, queue_of
from manager.cli.manageradmission import Outcome, decide, workload_of
from manager.cli.queuechain import multikueue_config, read_queue_chain
from manager.cli.tables import amount
from manager.cli.workerlook import WorkerLook, look_at_worker, verdict_of
from manager.controllers import devicecatalogue, jobs, jobworkload
from manager.controllers.jobkinds.base import MissingReference
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.federation.decisions import capacity, colocation, deviceneed, references, topology
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


async def device_need(api: KubeApi, namespace: str, pod_sets: list[Obj]) -> deviceneed.Need:
    """What each pod asks of a worker's devices, from the manager's ResourceClaimTemplates
    (as the dispatcher reads them when it places the workload)."""
    templates: dict[str, Obj] = {}
    for name in draclaims.template_names(pod_sets):
        with contextlib.suppress(errors.NotFound):
            templates[name] = await api.get(R.RESOURCE_CLAIM_TEMPLATES, name, namespace)
    return deviceneed.need_of(pod_sets, templates)


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
    allowed_raw = annotations_of(job).get(ALLOWED_CLUSTERS_ANNOTATION)
    allowed = {c.strip() for c in allowed_raw.split(",") if c.strip()} if allowed_raw else None
    clusters = federation[2] if federation is not None else []
    pod_sets = kind.workload_pod_sets(resolved)
    need = await device_need(api, job_ns, pod_sets)
    read_devices = bool(need) or draclaims.needs_catalogue(pod_sets, mappings)
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
