"""`kfed whatif` asks the manager's real admission core, on a snapshot built from API objects
with the controllers' converters: its answer must be what the manager then really decides.

Every case is a set of API-shaped objects (as one LIST of each kind returns them) and a Job.
The prediction is checked twice: against what the case expects, and against the manager's
own path, replayed here step by step as its controllers take it (objects fed to a core, the
Job's Workload created and scheduled, preemption victims evicted, quota released), without
the snapshot or the prediction's code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from rich.console import Console

from manager import core
from manager.api.clusterqueue import ClusterQueue
from manager.api.cohort import Cohort
from manager.api.localqueue import LocalQueue
from manager.api.resourceflavor import ResourceFlavor
from manager.api.workload import Workload
from manager.cli import manageradmission, prediction, snapshot, whatif
from manager.cli.manageradmission import Outcome
from manager.controllers import convert, jobworkload
from manager.controllers.workloads import priority_of

Obj = dict[str, Any]
NOW = 1_700_000_000.0
GROUP = "kueue.x-k8s.io/v1beta2"


# -- API objects ---------------------------------------------------------------------------------


def flavor(name: str, taints: list[Obj] | None = None) -> Obj:
    spec: Obj = {"nodeLabels": {"gpu.model": name}}
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, gpus: dict[str, int], **spec: Any) -> Obj:
    """Flavors in order, each with 64 cpu and ``gpus[flavor]`` GPUs; every namespace."""
    return {
        "apiVersion": GROUP,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": f,
                            "resources": [
                                {"name": "cpu", "nominalQuota": 64},
                                {"name": "nvidia.com/gpu", "nominalQuota": n},
                            ],
                        }
                        for f, n in gpus.items()
                    ],
                }
            ],
            **spec,
        },
    }


def local_queue(namespace: str, name: str, cq: str) -> Obj:
    return {
        "apiVersion": GROUP,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def _pod_template(gpus: int, **pod: Any) -> Obj:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}},
    }
    return {"spec": {"restartPolicy": "Never", "containers": [container], **pod}}


def _condition(kind: str) -> Obj:
    return {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": "",
        "lastTransitionTime": "2023-11-14T00:00:00Z",
    }


def held(
    name: str,
    cq: str,
    flavor_name: str,
    gpus: int,
    *,
    namespace: str = "ml-jobs",
    priority: int = 0,
    queue: str = "gpu-lq",
    **meta: Any,
) -> Obj:
    """A Workload holding quota in ``cq``, admitted there with ``flavor_name``."""
    return {
        "apiVersion": GROUP,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": "2023-11-14T00:00:00Z",
            **meta,
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": _pod_template(gpus)}],
        },
        "status": {
            "conditions": [_condition("QuotaReserved"), _condition("Admitted")],
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": flavor_name, "nvidia.com/gpu": flavor_name},
                        "resourceUsage": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                        "count": 1,
                    }
                ],
            },
        },
    }


def job(
    gpus: int, *, model: str | None = None, labels: dict[str, str] | None = None, **pod: Any
) -> Obj:
    if model:
        pod["nodeSelector"] = {"gpu.model": model}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ml-jobs",
            "labels": {"kueue.x-k8s.io/queue-name": "gpu-lq", **(labels or {})},
        },
        "spec": {"template": _pod_template(gpus, **pod)},
    }


FLAVORS = [flavor("rtx"), flavor("h100")]
GPU_CQ = cluster_queue("gpu-cq", {"rtx": 2, "h100": 4})
GPU_LQ = local_queue("ml-jobs", "gpu-lq", "gpu-cq")
PREEMPTING_CQ = cluster_queue(
    "gpu-cq", {"rtx": 2, "h100": 4}, preemption={"withinClusterQueue": "LowerPriority"}
)
BOTH_FULL = [held("a", "gpu-cq", "rtx", 2), held("b", "gpu-cq", "h100", 4)]
OTHER_CQ = cluster_queue("other-cq", {"h100": 4}, cohortName="all")
OTHER_LQ = local_queue("other", "other-lq", "other-cq")


# -- the manager's own path, replayed ----------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    outcome: Outcome
    flavors: dict[str, str]
    victims: list[str] = field(default_factory=list)
    reason: str = ""


def _flavors_of(admit: core.Admit) -> dict[str, str]:
    return {r: f for psa in admit.admission.pod_set_assignments for r, f in psa.flavors.items()}


def manager_replay(objects: dict[str, list[Obj]], the_job: Obj) -> Replay:
    """Feed a core as ClusterState and the Workload controller do, create the Job's Workload as
    the Job controller does, and run the scheduling loop; evict victims once preempted, and
    release all quota when it waits, as workloads finishing would."""
    c = core.AdmissionCore()
    for obj in objects.get("flavors", []):
        c.upsert_flavor(convert.flavor(ResourceFlavor.model_validate(obj)))
    for obj in objects.get("cohorts", []):
        c.upsert_cohort(convert.cohort(Cohort.model_validate(obj)))
    for obj in objects.get("cluster_queues", []):
        c.upsert_cluster_queue(convert.cluster_queue(ClusterQueue.model_validate(obj)))
    for obj in objects.get("local_queues", []):
        c.upsert_local_queue(convert.local_queue(LocalQueue.model_validate(obj)))
    for obj in objects.get("namespaces", []):
        labels = obj["metadata"].get("labels") or {}
        c.set_namespace_labels(core.Namespace(obj["metadata"]["name"]), labels)
    wpcs = {o["metadata"]["name"]: int(o["value"]) for o in objects.get("priority_classes", [])}
    holders = []
    for obj in objects.get("workloads", []):
        model = Workload.model_validate(obj)
        wl = convert.workload(model, priority=priority_of(model, wpcs.get), creation_time=0.0)
        admission = convert.admission_from_status(obj["status"]["admission"])
        c.add_admitted(wl, admission, reserved_at=0.0, admitted=True)
        holders.append(wl.key)
    model = Workload.model_validate(jobworkload.workload_for_job(the_job, wpcs.get))
    wl = convert.workload(model, priority=priority_of(model, wpcs.get), creation_time=NOW)
    c.add_workload(wl)

    result = c.schedule(NOW)
    if result.admitted:
        [admit] = result.admitted
        return Replay(Outcome.BORROWS if admit.borrowing else Outcome.FITS, _flavors_of(admit))
    if result.preempted:
        [preempt] = result.preempted
        for victim in preempt.victims:
            c.evict(victim.workload, now=NOW)  # their Jobs stopped: quota released, requeued
        [admit] = [a for a in c.schedule(NOW + 1).admitted if a.workload == wl.key]
        victims = [f"{v.workload} ({v.reason.human})" for v in preempt.victims]
        return Replay(Outcome.PREEMPTS, _flavors_of(admit), victims)
    reason = c.pending_reason(wl.key)
    assert reason is not None
    for key in holders:
        c.finish(key)
    later = [a for a in c.schedule(NOW + 1).admitted if a.workload == wl.key]
    if later:
        return Replay(Outcome.WAITS, _flavors_of(later[0]), reason=reason.message)
    return Replay(Outcome.NEVER, {}, reason=(c.pending_reason(wl.key) or reason).message)


# -- the cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    job: Obj
    objects: dict[str, list[Obj]]
    outcome: Outcome
    flavors: dict[str, str] = field(default_factory=dict)
    says: tuple[str, ...] = ()
    """Fragments of the core's words: reason, victims or passed-over flavors."""


def objects(**kinds: list[Obj]) -> dict[str, list[Obj]]:
    return {"flavors": FLAVORS, "cluster_queues": [GPU_CQ], "local_queues": [GPU_LQ], **kinds}


RTX = {"cpu": "rtx", "nvidia.com/gpu": "rtx"}
H100 = {"cpu": "h100", "nvidia.com/gpu": "h100"}

CASES = [
    Case("two flavors: the first in order", job(1), objects(), Outcome.FITS, RTX),
    Case(
        "two flavors: the one the node selector picks",
        job(4, model="h100"),
        objects(),
        Outcome.FITS,
        H100,
        ("flavor rtx doesn't match node selector gpu.model=h100",),
    ),
    Case(
        "two flavors, one full: the other",
        job(1),
        objects(workloads=[held("a", "gpu-cq", "rtx", 2)]),
        Outcome.FITS,
        H100,
        ("insufficient unused quota for nvidia.com/gpu in flavor rtx: 1 requested, 0 available",),
    ),
    Case(
        "two flavors, both full: waits for the first",
        job(1),
        objects(workloads=BOTH_FULL),
        Outcome.WAITS,
        RTX,
        ("flavor h100: 1 requested, 0 available",),
    ),
    Case(
        "two flavors, both full: preempts lower priority",
        job(1, priority=10),
        objects(cluster_queues=[PREEMPTING_CQ], workloads=BOTH_FULL),
        Outcome.PREEMPTS,
        RTX,
        ("ml-jobs/a (prioritization in the ClusterQueue)",),
    ),
    Case(
        "the priority comes from the WorkloadPriorityClass label",
        job(1, labels={"kueue.x-k8s.io/priority-class": "high"}),
        objects(
            cluster_queues=[PREEMPTING_CQ],
            workloads=BOTH_FULL,
            priority_classes=[{"metadata": {"name": "high"}, "value": 100}],
        ),
        Outcome.PREEMPTS,
        RTX,
    ),
    Case(
        "nothing of lower priority to preempt: waits",
        job(1, priority=10),
        objects(
            cluster_queues=[PREEMPTING_CQ],
            workloads=[
                held("a", "gpu-cq", "rtx", 2, priority=20),
                held("b", "gpu-cq", "h100", 4, priority=20),
            ],
        ),
        Outcome.WAITS,
        RTX,
    ),
    Case(
        "cohort: borrows what another queue does not use",
        job(6, model="h100"),
        objects(
            cluster_queues=[
                cluster_queue("gpu-cq", {"rtx": 2, "h100": 4}, cohortName="all"),
                OTHER_CQ,
            ],
            local_queues=[GPU_LQ, OTHER_LQ],
        ),
        Outcome.BORROWS,
        H100,
        ("borrowing from cohort all",),
    ),
    Case(
        "cohort: waits while another queue borrows, when it may not reclaim",
        job(4, model="h100"),
        objects(
            cluster_queues=[
                cluster_queue("gpu-cq", {"rtx": 2, "h100": 4}, cohortName="all"),
                OTHER_CQ,
            ],
            local_queues=[GPU_LQ, OTHER_LQ],
            workloads=[held("x", "other-cq", "h100", 6, namespace="other", queue="other-lq")],
        ),
        Outcome.WAITS,
        H100,
        ("insufficient unused quota for nvidia.com/gpu in flavor h100: 4 requested, 2 available",),
    ),
    Case(
        "cohort: reclaims its lent quota",
        job(4, model="h100"),
        objects(
            cluster_queues=[
                cluster_queue(
                    "gpu-cq",
                    {"rtx": 2, "h100": 4},
                    cohortName="all",
                    preemption={"reclaimWithinCohort": "Any"},
                ),
                OTHER_CQ,
            ],
            local_queues=[GPU_LQ, OTHER_LQ],
            workloads=[held("x", "other-cq", "h100", 6, namespace="other", queue="other-lq")],
        ),
        Outcome.PREEMPTS,
        H100,
        ("other/x (reclamation within the cohort)",),
    ),
    Case(
        "cohort: more than the whole cohort never fits",
        job(9, model="h100"),
        objects(
            cluster_queues=[
                cluster_queue("gpu-cq", {"rtx": 2, "h100": 4}, cohortName="all"),
                OTHER_CQ,
            ],
            local_queues=[GPU_LQ, OTHER_LQ],
        ),
        Outcome.NEVER,
        says=("ClusterQueue gpu-cq can get at most 8 even when its cohort is idle",),
    ),
    Case(
        "a queue with no such flavor never fits",
        job(1, model="a100"),
        objects(),
        Outcome.NEVER,
        says=("flavor rtx doesn't match node selector gpu.model=a100",),
    ),
    Case(
        "beyond every nominal quota never fits",
        job(16),
        objects(),
        Outcome.NEVER,
        says=("16 requested, but ClusterQueue gpu-cq can get at most 4",),
    ),
    Case(
        "an uncovered resource never fits",
        job(
            1, containers=[{"name": "m", "image": "b", "resources": {"requests": {"a.io/f": "1"}}}]
        ),
        objects(),
        Outcome.NEVER,
        says=("resource a.io/f unavailable in ClusterQueue gpu-cq",),
    ),
    Case(
        "an untolerated taint passes a flavor over",
        job(1),
        objects(flavors=[flavor("rtx", [{"key": "k", "effect": "NoSchedule"}]), flavor("h100")]),
        Outcome.FITS,
        H100,
        ("untolerated taint",),
    ),
    Case(
        "a namespace the queue does not select never fits",
        job(1),
        objects(
            cluster_queues=[cluster_queue("gpu-cq", {"rtx": 2}, namespaceSelector=None)],
            namespaces=[{"metadata": {"name": "ml-jobs"}}],
        ),
        Outcome.NEVER,
        says=("namespace ml-jobs is not selected",),
    ),
    Case(
        "a queue whose flavor is missing never fits",
        job(1),
        objects(flavors=[flavor("h100")]),
        Outcome.NEVER,
        says=("ClusterQueue gpu-cq is inactive: flavor rtx not found",),
    ),
]


def predicted(case: Case) -> manageradmission.Decision:
    snap = snapshot.from_objects(**case.objects, now=NOW)
    return manageradmission.decide(
        snap, manageradmission.workload_of(case.job, snap, now=NOW), now=NOW
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_prediction_is_what_the_manager_decides(case: Case) -> None:
    decision = predicted(case)
    replay = manager_replay(case.objects, case.job)

    assert decision.outcome is case.outcome
    assert decision.flavors == case.flavors
    words = " | ".join([decision.reason, *decision.victims, *decision.passed_over])
    for fragment in case.says:
        assert fragment in words

    assert (decision.outcome, decision.flavors) == (replay.outcome, replay.flavors)
    assert list(decision.victims) == replay.victims
    if decision.outcome in (Outcome.WAITS, Outcome.NEVER):
        assert decision.reason == replay.reason
    assert decision.fits_now is (decision.outcome in (Outcome.FITS, Outcome.BORROWS))


def test_the_usage_is_the_admissions_for_all_pods() -> None:
    parallel = job(1, model="h100")
    parallel["spec"] |= {"parallelism": 3, "completions": 2}
    case = Case("", parallel, objects(), Outcome.FITS)
    assert predicted(case).usage == {("h100", "cpu"): 2000, ("h100", "nvidia.com/gpu"): 2}


# -- the snapshot ------------------------------------------------------------------------------


def test_only_workloads_holding_quota_count() -> None:
    finished = held("done", "gpu-cq", "rtx", 2)
    finished["status"]["conditions"].append(_condition("Finished"))
    deleting = held("deleting", "gpu-cq", "rtx", 2, deletionTimestamp="2023-11-14T00:00:00Z")
    pending = held("pending", "gpu-cq", "rtx", 2)
    del pending["status"]["admission"]
    snap = snapshot.from_objects(
        workloads=[finished, deleting, pending, held("running", "gpu-cq", "rtx", 1)], now=NOW
    )
    assert [h.workload.key for h in snap.held] == ["ml-jobs/running"]


def test_objects_the_controllers_cannot_use_are_reported_not_fatal() -> None:
    broken = cluster_queue("gpu-cq", {"rtx": 2})
    broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    case = Case("", job(1), objects(cluster_queues=[broken]), Outcome.NEVER)
    decision = predicted(case)
    assert decision.outcome is Outcome.NEVER
    assert "ClusterQueue gpu-cq doesn't exist (ClusterQueue gpu-cq is not valid:" in (
        decision.reason
    )


def test_a_misconfigured_multikueue_queue_is_inactive_as_on_the_manager() -> None:
    checks = [{"name": "mk-1"}, {"name": "mk-2"}]
    cq = cluster_queue("gpu-cq", {"rtx": 2}, admissionChecksStrategy={"admissionChecks": checks})
    mk = [
        {
            "metadata": {"name": n},
            "spec": {"controllerName": "kueue.x-k8s.io/multikueue"},
        }
        for n in ("mk-1", "mk-2")
    ]
    case = Case("", job(1), objects(cluster_queues=[cq], admission_checks=mk), Outcome.NEVER)
    assert "Cannot use multiple MultiKueue AdmissionChecks" in predicted(case).reason


# -- what `kfed whatif` prints -------------------------------------------------------------------


def rendered(case: Case) -> list[str]:
    d = predicted(case)
    p = prediction.Prediction(
        job="ml-jobs/j",
        queue="ml-jobs/gpu-lq",
        cluster_queue="gpu-cq",
        requests={},
        manager_flavors=d.flavors,
        manager_fits_now=d.fits_now,
        manager_notes=list(d.passed_over),
        manager_outcome=str(d.outcome),
        manager_reason=d.reason,
        manager_victims=list(d.victims),
        federated=False,
        verdict="runs on the manager",
    )
    console = Console(record=True, width=300)
    console.print(whatif.render_prediction(p))
    return [line.rstrip() for line in console.export_text().splitlines()]


@pytest.mark.parametrize(
    ("case", "lines"),
    [
        (
            CASES[1],
            [
                "  manager flavor cpu=h100, nvidia.com/gpu=h100 (fits its free quota now)",
                "    skipped: couldn't assign flavors: flavor rtx doesn't match node selector "
                "gpu.model=h100",
            ],
        ),
        (
            CASES[3],
            [
                "  manager flavor cpu=rtx, nvidia.com/gpu=rtx (no free quota now: it would wait "
                "in the queue)",
                "    waits: insufficient unused quota for nvidia.com/gpu in flavor rtx: 1 "
                "requested, 0 available; insufficient unused quota for nvidia.com/gpu in flavor "
                "h100: 1 requested, 0 available",
            ],
        ),
        (
            CASES[4],
            [
                "  manager flavor cpu=rtx, nvidia.com/gpu=rtx (fits once it has preempted 1 "
                "workload(s))",
                "    preempts ml-jobs/a (prioritization in the ClusterQueue)",
            ],
        ),
        (
            CASES[7],
            [
                "  manager flavor cpu=h100, nvidia.com/gpu=h100 (fits now, borrowing from "
                "cohort all)"
            ],
        ),
    ],
    ids=["fits", "waits", "preempts", "borrows"],
)
def test_whatif_prints_the_cores_verdict(case: Case, lines: list[str]) -> None:
    text = rendered(case)
    start = next(i for i, line in enumerate(text) if line.startswith("  manager flavor"))
    assert text[start : start + len(lines)] == lines
