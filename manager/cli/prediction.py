"""Where a Job would go now, computed the way the manager would, and changing nothing.

Two steps, as in the federation: the manager's own queue first assigns a flavor
(``assign_manager_flavors``: for every resource group of the ClusterQueue, the first flavor,
in the queue's order, whose nodeLabels and taints suit the pod template and whose free
nominal quota covers the request, else the first one whose nominal quota could ever cover it,
as Kueue's default flavorFungibility does without a cohort); then the dispatcher evaluates
every worker of the queue's MultiKueueConfig with ``manager.federation.capacity`` and picks
one by its scoring rule. Workers are read with the kubeconfigs the manager holds in its
Secrets, from where the CLI runs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api import quantity
from manager.api.resourceflavor import ResourceFlavor
from manager.cli.common import CliError, connect_dict, usage_error
from manager.cli.jobfiles import display_name, namespace_of, pod_set, queue_of
from manager.cli.tables import amount
from manager.controllers import conditions, convert
from manager.core.selectors import first_untolerated_taint, node_selection_mismatch
from manager.federation import capacity, kubeconfig
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]
RULE = "best fit, then fewest waiting, then config order"


class NoFlavor(Exception):
    """The manager's ClusterQueue can never admit the Job: no flavor suits it."""


@dataclass(frozen=True, slots=True)
class ManagerAssignment:
    cluster_queue: str
    flavors: dict[str, str]
    """Resource -> flavor."""
    usage: dict[tuple[str, str], int]
    """(flavor, resource) -> total request in core units."""
    fits_now: bool
    """Whether the chosen flavors' free nominal quota covers the request right now."""
    notes: list[str] = field(default_factory=list)
    """Flavors passed over, and why."""


def requests_of(ps: core.PodSet, covered: set[str]) -> dict[str, int]:
    """Total requests of the pod set (per pod x count), plus ``pods`` when the queue counts
    them."""
    total = {str(r): v * ps.count for r, v in ps.requests.items() if v}
    if str(core.PODS) in covered:
        total[str(core.PODS)] = ps.count
    return total


def _quotas(cq: Obj) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        for fq in rg.get("flavors") or []:
            result[str(fq["name"])] = {
                str(r["name"]): quantity.to_core_units(r["name"], r.get("nominalQuota", 0))
                for r in fq.get("resources") or []
            }
    return result


def _reserved(cq: Obj) -> dict[tuple[str, str], int]:
    result: dict[tuple[str, str], int] = {}
    for fu in (cq.get("status") or {}).get("flavorsReservation") or []:
        for r in fu.get("resources") or []:
            result[(str(fu["name"]), str(r["name"]))] = quantity.to_core_units(
                r["name"], r.get("total") or 0
            )
    return result


def _flavor_mismatch(name: str, flavors: Mapping[str, Obj], ps: core.PodSet) -> str | None:
    obj = flavors.get(name)
    if obj is None:
        return f"flavor {name}: ResourceFlavor not found"
    flavor = convert.flavor(ResourceFlavor.model_validate(obj))
    taint = first_untolerated_taint(flavor.node_taints, ps.tolerations + flavor.tolerations)
    if taint is not None:
        return f"flavor {name}: untolerated taint {taint}"
    why = node_selection_mismatch(ps.node_selector, ps.node_affinity, flavor.node_labels)
    return f"flavor {name}: {why}" if why else None


def assign_manager_flavors(
    cq: Obj, flavors: Mapping[str, Obj], ps: core.PodSet
) -> ManagerAssignment:
    """The flavor per resource the manager's ClusterQueue would assign; raises NoFlavor."""
    cq_name = str(cq["metadata"]["name"])
    groups = [
        (
            [str(r) for r in rg.get("coveredResources") or []],
            [str(f["name"]) for f in rg.get("flavors") or []],
        )
        for rg in (cq.get("spec") or {}).get("resourceGroups") or []
    ]
    covered = {r for resources, _ in groups for r in resources}
    requests = requests_of(ps, covered)
    quotas, reserved = _quotas(cq), _reserved(cq)
    has_cohort = bool((cq.get("spec") or {}).get("cohortName"))
    chosen: dict[str, str] = {}
    notes: list[str] = []
    fits_now = True
    for resource in sorted(requests):
        if resource in chosen:
            continue
        group = next((g for g in groups if resource in g[0]), None)
        if group is None:
            raise NoFlavor(f"ClusterQueue {cq_name} covers no {resource}")
        wanted = {r: requests[r] for r in group[0] if r in requests}
        later: str | None = None
        picked: str | None = None
        for name in group[1]:
            mismatch = _flavor_mismatch(name, flavors, ps)
            if mismatch is not None:
                notes.append(mismatch)
                continue
            nominal = quotas.get(name, {})
            too_big = [
                r
                for r, v in sorted(wanted.items())
                if v > nominal.get(r, 0) and not (has_cohort and r in nominal)
            ]
            if too_big:
                r = too_big[0]
                notes.append(
                    f"flavor {name}: {amount(r, wanted[r])} {r} requested, nominal quota "
                    f"{amount(r, nominal.get(r, 0))}"
                )
                continue
            short = [
                r
                for r, v in sorted(wanted.items())
                if v > nominal.get(r, 0) - reserved.get((name, r), 0)
            ]
            if not short:
                picked = name
                break
            r = short[0]
            free = nominal.get(r, 0) - reserved.get((name, r), 0)
            notes.append(
                f"flavor {name}: {amount(r, wanted[r])} {r} requested, "
                f"{amount(r, max(free, 0))} free now"
            )
            later = later or name
        if picked is None and later is not None:
            picked, fits_now = later, False
        if picked is None:
            raise NoFlavor(
                f"no flavor of ClusterQueue {cq_name} suits the Job's {resource}: "
                + "; ".join(notes)
            )
        for r in wanted:
            chosen[r] = picked
    usage = {(chosen[r], r): v for r, v in requests.items()}
    return ManagerAssignment(cq_name, chosen, usage, fits_now, notes)


# -- the federation as the manager sees it ----------------------------------------------------


def admission_check_names(cq: Obj) -> list[str]:
    spec = cq.get("spec") or {}
    strategy = spec.get("admissionChecksStrategy") or {}
    names = [str(rule["name"]) for rule in strategy.get("admissionChecks") or []]
    return names + [str(n) for n in spec.get("admissionChecks") or [] if str(n) not in names]


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
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    try:
        cq: Obj | None = await api.get(R.CLUSTER_QUEUES, cq_name)
    except errors.NotFound:
        cq = None
    return QueueChain(lq, cq_name, cq)


async def multikueue_config(api: KubeApi, cq: Obj) -> tuple[str, str, list[str]] | None:
    """(AdmissionCheck, MultiKueueConfig, its clusters) of a ClusterQueue; None when the
    queue has no MultiKueue check (its jobs run on the manager)."""
    for name in admission_check_names(cq):
        try:
            ac = await api.get(R.ADMISSION_CHECKS, name)
        except errors.NotFound:
            continue
        spec = ac.get("spec") or {}
        if spec.get("controllerName") != C.MULTIKUEUE_CONTROLLER_NAME:
            continue
        params = spec.get("parameters") or {}
        config = str(params.get("name") or "")
        if params.get("kind") != "MultiKueueConfig" or not config:
            return name, config, []
        try:
            obj = await api.get(R.MULTIKUEUE_CONFIGS, config)
        except errors.NotFound:
            return name, config, []
        return name, config, [str(c) for c in (obj.get("spec") or {}).get("clusters") or []]
    return None


def _by_key(items: list[Obj]) -> dict[str, Obj]:
    result = {}
    for obj in items:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        result[str(key)] = obj
    return result


async def _read_worker(
    name: str, order: int, checked: kubeconfig.CheckedKubeconfig, namespace: str
) -> capacity.WorkerView:
    api = await connect_dict(checked.config, checked.context, name=name)
    try:
        lqs, cqs, rfs = await asyncio.gather(
            api.list(R.LOCAL_QUEUES, namespace),
            api.list(R.CLUSTER_QUEUES),
            api.list(R.RESOURCE_FLAVORS),
        )
    finally:
        await api.close()
    return capacity.WorkerView(
        name=name,
        local_queues=_by_key(lqs["items"]),
        cluster_queues=_by_key(cqs["items"]),
        flavors=_by_key(rfs["items"]),
        order=order,
    )


async def _worker_kubeconfig(
    api: KubeApi, mk_cluster: Obj, namespace: str
) -> kubeconfig.CheckedKubeconfig:
    name = mk_cluster["metadata"]["name"]
    source = ((mk_cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
    if source.get("locationType", "Secret") != "Secret" or not source.get("location"):
        raise CliError(f"MultiKueueCluster {name} does not keep its kubeconfig in a Secret")
    secret = await api.get(R.SECRETS, str(source["location"]), namespace)
    data = (secret.get("data") or {}).get(C.MULTIKUEUE_KUBECONFIG_SECRET_KEY)
    if not data:
        raise CliError(f"Secret {namespace}/{source['location']} has no key kubeconfig")
    try:
        text = base64.b64decode(data).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise CliError(f"Secret {namespace}/{source['location']}: not base64 text") from None
    try:
        return kubeconfig.check(text)
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(f"{err.reason}: {err}") from None


async def evaluate_worker(
    api: KubeApi,
    name: str,
    order: int,
    *,
    request: capacity.Request,
    manager_flavors: Mapping[str, Obj],
    namespace: str,
    allowed: set[str] | None,
) -> capacity.Candidate:
    """One worker's verdict, with the same pre-checks as the dispatcher (allow-list,
    connected, maintenance), then capacity.evaluate on its queues."""
    if allowed is not None and name not in allowed:
        return capacity.Candidate(
            name, False, f"not in the job's {ALLOWED_CLUSTERS_ANNOTATION}", never=True
        )
    try:
        mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, name)
    except errors.NotFound:
        return capacity.Candidate(name, False, "no MultiKueueCluster of that name")
    active = conditions.find((mk_cluster.get("status") or {}).get("conditions"), C.ACTIVE)
    if active is None or active.get("status") != "True":
        detail = (
            f"{active.get('reason', '')}: {active.get('message', '')}"
            if active
            else "no Active condition (is the kfed manager running?)"
        )
        return capacity.Candidate(name, False, f"not connected ({detail})")
    mode = (mk_cluster["metadata"].get("annotations") or {}).get(C.MAINTENANCE_ANNOTATION, "")
    if mode in (C.MAINTENANCE_CORDON, C.MAINTENANCE_DRAIN):
        return capacity.Candidate(name, False, f"in maintenance ({mode})")
    try:
        checked = await _worker_kubeconfig(api, mk_cluster, namespace)
        view = await _read_worker(name, order, checked, request.namespace)
    except CliError as err:
        return capacity.Candidate(name, False, f"cannot be read from here: {err.message}")
    except errors.KubeError as err:
        return capacity.Candidate(name, False, f"cannot be read from here: {err}")
    return capacity.evaluate(view, request, manager_flavors)


@dataclass(frozen=True, slots=True)
class Prediction:
    job: str
    queue: str
    cluster_queue: str
    requests: dict[str, str]
    manager_flavors: dict[str, str]
    manager_fits_now: bool
    manager_notes: list[str]
    federated: bool
    admission_check: str = ""
    config: str = ""
    candidates: list[capacity.Candidate] = field(default_factory=list)
    chosen: str | None = None
    rule: str = RULE
    verdict: str = ""


async def predict(api: KubeApi, job: Obj, *, namespace: str) -> Prediction:
    """Where ``job`` would go now; ``namespace`` is kfed's namespace (the Secrets)."""
    job_ns, queue = namespace_of(job), queue_of(job)
    if not queue:
        raise usage_error(
            f"Job {display_name(job)} has no {C.QUEUE_NAME_LABEL} label: pass --queue"
        )
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
    flavors = _by_key((await api.list(R.RESOURCE_FLAVORS))["items"])
    ps = pod_set(job)
    try:
        assignment = assign_manager_flavors(cq, flavors, ps)
    except NoFlavor as err:
        raise CliError(f"the manager would never admit Job {display_name(job)}: {err}") from None
    base = Prediction(
        job=display_name(job),
        queue=f"{job_ns}/{queue}",
        cluster_queue=cq_name,
        requests={r: amount(r, v) for (_, r), v in sorted(assignment.usage.items())},
        manager_flavors=dict(sorted(assignment.flavors.items())),
        manager_fits_now=assignment.fits_now,
        manager_notes=assignment.notes,
        federated=False,
        verdict=f"runs on the manager: ClusterQueue {cq_name} has no MultiKueue check",
    )
    federation = await multikueue_config(api, cq)
    if federation is None:
        return base
    check, config, clusters = federation
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    allowed_raw = annotations.get(ALLOWED_CLUSTERS_ANNOTATION)
    allowed = {c.strip() for c in allowed_raw.split(",") if c.strip()} if allowed_raw else None
    request = capacity.Request(job_ns, queue, assignment.usage)
    candidates = list(
        await asyncio.gather(
            *(
                evaluate_worker(
                    api,
                    name,
                    order,
                    request=request,
                    manager_flavors=flavors,
                    namespace=namespace,
                    allowed=allowed,
                )
                for order, name in enumerate(clusters)
            )
        )
    )
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
    if best is not None and not assignment.fits_now:
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
