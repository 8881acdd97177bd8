"""The probes of a drill: small Jobs that run on the cluster about to be broken, so the drill
can watch them move.

Choosing where they run: the probes ask for a little cpu and memory in ONE flavor of the
queue's ClusterQueue, selected by that flavor's nodeLabels as a nodeSelector. The flavor must
be one the target cluster AND at least one other Active worker offer with free quota for all
probes (evaluated as ``kfed whatif`` does), otherwise failover has nowhere to go and the drill
refuses to start.

Placing them on the target: while they are placed, the probe Jobs carry the allow-list
annotation ``kfed.io/allowed-clusters: <target>`` so the dispatcher can only pick the target;
once they run there the annotation is removed, so failover may pick any worker. Nothing else
in the federation is touched (no other cluster is cordoned).

They run long enough to outlast the drill: a ``sleep`` container that exits at once on
SIGTERM (so a fenced probe stops at once), and on kwok nodes the completion delay annotation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from manager.api import constants as C
from manager.api.view import at, labels_of
from manager.cli import prediction, queuechain, submission
from manager.cli.common import CliError, usage_error
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]

RUN_LABEL = "kfed.io/drill-run"
"""On probe Jobs and their pods: the drill run they belong to."""
PROBE_LABEL = "kfed.io/drill-probe"
"""On probe Jobs and their pods: the probe's name (its Job's name)."""
KWOK_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
"""kwok's fake nodes complete a pod after this many milliseconds (e2e/local/kwok-stages.yaml)."""
PROBE_REQUESTS = {"cpu": "100m", "memory": "64Mi"}
DEFAULT_IMAGE = "busybox:1.36"


@dataclass(frozen=True, slots=True)
class ProbePlan:
    run_id: str
    kind: str
    target: str
    namespace: str
    queue: str
    count: int
    image: str
    seconds: int
    """How long a probe runs: longer than the whole drill."""
    flavor: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    config: str = ""
    clusters: list[str] = field(default_factory=list)
    """The workers of the queue's MultiKueueConfig."""
    destinations: list[str] = field(default_factory=list)
    """The other workers that can take the probes now."""

    @property
    def names(self) -> list[str]:
        return [f"drill-{self.kind}-{self.run_id}-{i}" for i in range(1, self.count + 1)]

    @property
    def queue_key(self) -> str:
        return f"{self.namespace}/{self.queue}"


def probe_job(plan: ProbePlan, name: str, *, pods: int = 1, only_on: str | None = None) -> Obj:
    """A probe Job (``pods`` > 1: all probes as one Job, to check capacity for all at once)."""
    labels = {RUN_LABEL: plan.run_id, PROBE_LABEL: name}
    annotations = {ALLOWED_CLUSTERS_ANNOTATION: only_on} if only_on else {}
    pod_spec: Obj = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [
            {
                "name": "probe",
                "image": plan.image,
                "command": ["sh", "-c", f"trap 'exit 0' TERM; sleep {plan.seconds} & wait"],
                "resources": {"requests": dict(plan.requests)},
            }
        ],
    }
    if plan.node_selector:
        pod_spec["nodeSelector"] = dict(plan.node_selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": {**labels, C.QUEUE_NAME_LABEL: plan.queue},
            "annotations": annotations,
        },
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {KWOK_DELAY_ANNOTATION: str(plan.seconds * 1000)},
                },
                "spec": pod_spec,
            },
        },
    }


# -- choosing the flavor -------------------------------------------------------------------------


def flavor_candidates(cq: Obj) -> tuple[list[str], dict[str, str]]:
    """The flavors of the resource groups covering the probes' resources, in the queue's
    order, and the requests the queue covers."""
    flavors: list[str] = []
    covered: set[str] = set()
    for rg in at(cq, "spec").get("resourceGroups") or []:
        resources = {str(r) for r in rg.get("coveredResources") or []}
        if resources & set(PROBE_REQUESTS):
            covered |= resources
            flavors += [str(f["name"]) for f in rg.get("flavors") or [] if f["name"] not in flavors]
    return flavors, {r: v for r, v in PROBE_REQUESTS.items() if r in covered}


async def plan_probes(
    api: KubeApi, base: ProbePlan, *, flavor: str | None, namespace: str
) -> ProbePlan:
    """Where the probes go: the first flavor (or ``flavor``) in which the target and another
    worker both have room for every probe. ``namespace`` is kfed's (the worker Secrets)."""
    key = base.queue_key
    chain = await queuechain.read_queue_chain(api, base.namespace, base.queue)
    if chain.local_queue is None:
        raise usage_error(
            f"LocalQueue {key} not found on the manager: pass --queue NAMESPACE/LOCALQUEUE of a "
            "queue whose ClusterQueue dispatches to the workers"
        )
    cq_name, cq = chain.cluster_queue_name, chain.cluster_queue
    if cq is None:
        raise CliError(f"LocalQueue {key} points to ClusterQueue {cq_name}, which does not exist")
    federation = await queuechain.multikueue_config(api, cq)
    if federation is None:
        raise usage_error(
            f"queue {key} is not federated (ClusterQueue {cq_name} has no MultiKueue admission "
            "check): its jobs run on the manager, there is nothing to fail over"
        )
    _, config, clusters = federation
    if base.target not in clusters:
        raise usage_error(
            f"{base.target} is not a worker of MultiKueueConfig {config or '(none)'}, where queue "
            f"{key} dispatches (workers: {', '.join(clusters) or 'none'})"
        )
    candidates, requests = flavor_candidates(cq)
    if not requests:
        raise usage_error(
            f"ClusterQueue {cq_name} covers neither cpu nor memory: the probes need one of them"
        )
    if flavor is not None:
        if flavor not in candidates:
            raise usage_error(
                f"flavor {flavor} is not offered for cpu/memory by ClusterQueue {cq_name} "
                f"(flavors: {', '.join(candidates)})"
            )
        candidates = [flavor]
    manager_flavors = {
        str(f["metadata"]["name"]): f for f in (await api.list(R.RESOURCE_FLAVORS))["items"]
    }
    reasons = []
    for name in candidates:
        labels = at(manager_flavors.get(name), "spec", "nodeLabels")
        plan = replace(
            base,
            flavor=name,
            node_selector={str(k): str(v) for k, v in labels.items()},
            requests=requests,
            config=config,
            clusters=clusters,
        )
        why, destinations = await _fits(api, plan, namespace)
        if why is None:
            return replace(plan, destinations=destinations)
        reasons.append(f"{name}: {why}")
    raise CliError(
        f"no flavor of ClusterQueue {cq_name} lets {base.count} probe(s) run on {base.target} "
        f"and move to another worker ({'; '.join(reasons)}); a drill needs somewhere to move to"
    )


async def _fits(api: KubeApi, plan: ProbePlan, namespace: str) -> tuple[str | None, list[str]]:
    """Why all probes cannot run on the target and also on another worker in the plan's
    flavor (None: they can), and the other workers that could take them."""
    job = probe_job(plan, f"drill-{plan.run_id}-check", pods=plan.count)
    try:
        p = await prediction.predict(api, job, namespace=namespace)
    except CliError as err:
        return err.message, []
    assigned = set(p.manager_flavors.values())
    if assigned != {plan.flavor}:
        return (
            f"the manager's queue would assign {', '.join(sorted(assigned))} "
            "(this flavor has no nodeLabels to select it by)",
            [],
        )
    if not p.manager_fits_now:
        return f"the manager's ClusterQueue has no free quota for {plan.count} probe(s) now", []
    by_name = {c.cluster: c for c in p.candidates}
    target = by_name.get(plan.target)
    if target is None or not target.fits:
        return (target.describe() if target else f"{plan.target}: not evaluated"), []
    others = [c for c in p.candidates if c.cluster != plan.target]
    destinations = [c.cluster for c in others if c.fits]
    if not destinations:
        detail = "; ".join(c.describe() for c in others) or "no other worker in the config"
        return f"no other worker can take them ({detail})", []
    return None, destinations


# -- placing them on the target ----------------------------------------------------------------


async def running_probes(api: KubeApi, plan: ProbePlan) -> dict[str, int]:
    """Probe -> number of its pods Running on the cluster behind ``api``."""
    pods = await api.list(R.PODS, plan.namespace, label_selector=f"{RUN_LABEL}={plan.run_id}")
    counts: dict[str, int] = {}
    for pod in pods["items"]:
        if at(pod, "status").get("phase") == "Running":
            probe = labels_of(pod).get(PROBE_LABEL, "")
            counts[probe] = counts.get(probe, 0) + 1
    return counts


async def place(
    api: KubeApi,
    plan: ProbePlan,
    target_api: KubeApi,
    *,
    timeout: float,
    on_update: Callable[[str], None] = lambda _: None,
) -> dict[str, str]:
    """Create the probes, wait until each runs on the target (read there directly), then
    lift the allow-list. Returns probe -> the name of its Workload (the same on every
    cluster)."""
    created = await submission.create_jobs(
        api, [probe_job(plan, name, only_on=plan.target) for name in plan.names]
    )

    def show(states: list[submission.Placement]) -> None:
        done = sum(1 for s in states if s.done)
        waiting = next((s.text for s in states if not s.done), "")
        on_update(f"{done}/{len(states)} probes placed on {plan.target}; {waiting}")

    states, placed = await submission.wait_placed(api, created, timeout=timeout, on_update=show)
    if not placed:
        late = next(s for s in states if not s.done)
        raise CliError(
            f"the probes were not placed on {plan.target} within {timeout:g}s ({late.job}: "
            f"{late.text}); see `kfed explain {late.job}`"
        )
    elsewhere = [s for s in states if s.cluster != plan.target]
    if elsewhere:
        raise CliError(
            f"probe {elsewhere[0].job} was placed on {elsewhere[0].cluster}, not {plan.target}"
        )
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        running = await running_probes(target_api, plan)
        ready = [name for name in plan.names if running.get(name)]
        on_update(f"{len(ready)}/{plan.count} probes running on {plan.target}")
        if len(ready) == plan.count:
            break
        if asyncio.get_running_loop().time() >= deadline:
            raise CliError(
                f"the probes were placed on {plan.target} but {plan.count - len(ready)} did not "
                f"run there within {timeout:g}s: check its nodes (flavor {plan.flavor}, "
                f"nodeSelector {plan.node_selector or '{}'}) and that image {plan.image} can be "
                "pulled there"
            )
        await asyncio.sleep(0.5)
    for name in plan.names:
        await api.patch(
            R.JOBS,
            name,
            {"metadata": {"annotations": {ALLOWED_CLUSTERS_ANNOTATION: None}}},
            plan.namespace,
        )
    workloads = {}
    for job in created:
        workload = await submission.workload_of(api, job)
        if workload is None:
            raise CliError(f"probe {job['metadata']['name']} lost its Workload on the manager")
        workloads[str(job["metadata"]["name"])] = str(workload["metadata"]["name"])
    return workloads


# -- cleaning up ----------------------------------------------------------------------------------


async def remove(
    api: KubeApi,
    plan: ProbePlan,
    workloads: Mapping[str, str],
    workers: Mapping[str, KubeApi],
    *,
    timeout: float,
) -> list[str]:
    """Delete the probe Jobs and Workloads on the manager, then wait (bounded) until the
    manager has removed their copies from every worker. Returns notes about leftovers."""
    for name in plan.names:
        with contextlib.suppress(errors.NotFound):
            await api.delete(R.JOBS, name, plan.namespace, propagation="Background")
    for workload in workloads.values():
        with contextlib.suppress(errors.NotFound):
            await api.delete(R.WORKLOADS, workload, plan.namespace)
    names = set(workloads.values())

    async def left_on() -> list[str]:
        found = []
        for cluster, worker in workers.items():
            with contextlib.suppress(errors.KubeError):
                items = (await worker.list(R.WORKLOADS, plan.namespace))["items"]
                jobs = await worker.list(
                    R.JOBS, plan.namespace, label_selector=f"{RUN_LABEL}={plan.run_id}"
                )
                if any(w["metadata"]["name"] in names for w in items) or jobs["items"]:
                    found.append(cluster)
        return found

    deadline = asyncio.get_running_loop().time() + timeout
    remaining = await left_on()
    while remaining and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.5)
        remaining = await left_on()
    if remaining:
        return [
            f"copies of the probes are still on {', '.join(remaining)}; the manager's garbage "
            f"collection removes them (label {RUN_LABEL}={plan.run_id})"
        ]
    return []


async def leftover_probes(api: KubeApi) -> list[Obj]:
    """Probe Jobs of any drill still on the manager (an interrupted drill's)."""
    return list((await api.list(R.JOBS, label_selector=RUN_LABEL))["items"])


async def delete_probe(api: KubeApi, job: Obj) -> None:
    meta = job["metadata"]
    workload = await submission.workload_of(api, job)
    with contextlib.suppress(errors.NotFound):
        await api.delete(R.JOBS, meta["name"], meta["namespace"], propagation="Background")
    if workload is not None:
        with contextlib.suppress(errors.NotFound):
            await api.delete(R.WORKLOADS, workload["metadata"]["name"], meta["namespace"])
