"""The state behind upstream's v0.18 and v0.19 gauges, from hand-made objects and a real
admission core: the cohort tree (``kueue_cluster_queue_info``, ``kueue_cohort_info``), the
requests of pending workloads (``kueue_cluster_queue_resource_pending``) and the workloads
not admitted (``kueue_unadmitted_workloads``), and what a scrape then shows."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client.parser import text_string_to_metric_families

from manager.api import constants as C
from manager.controllers.state import ClusterState
from manager.kube.api import KubeApi
from manager.observability.queuetree import pending_resources, queue_tree, unadmitted_samples
from manager.observability.sources import set_queue_metrics
from manager.telemetry.metrics import Metrics, TreeSample, UnadmittedSample
from tests.unit.core.builders import (
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)


def state() -> ClusterState:
    return ClusterState(cast(KubeApi, None))


def put(informer: Any, key: str, obj: dict[str, Any]) -> None:
    informer.cache[key] = obj


def cq_obj(name: str, cohort: str = "", resources: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if cohort:
        spec["cohortName"] = cohort
    if resources:
        spec["resourceGroups"] = [
            {
                "coveredResources": list(resources),
                "flavors": [
                    {
                        "name": "a100",
                        "resources": [{"name": r, "nominalQuota": 0} for r in resources],
                    }
                ],
            }
        ]
    return {"metadata": {"name": name}, "spec": spec}


def cohort_obj(name: str, parent: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"parentName": parent} if parent else {}}


def test_the_tree_names_each_parent_and_root_and_leaves_a_cycle_out() -> None:
    s = state()
    for name, parent in (("team", "org"), ("org", ""), ("x", "y"), ("y", "x")):
        put(s.cohorts, name, cohort_obj(name, parent))
    for name, cohort in (("a", "team"), ("b", ""), ("c", "x"), ("d", "solo")):
        put(s.cluster_queues, name, cq_obj(name, cohort))
    queues, cohorts = queue_tree(s)
    assert queues == [
        TreeSample("a", "team", "org"),
        TreeSample("b", "", ""),  # no cohort
        TreeSample("c", "", ""),  # its cohort is in a cycle: upstream reports no tree
        TreeSample("d", "solo", "solo"),  # a cohort no Cohort object declares
    ]
    assert cohorts == [
        TreeSample("org", "", "org"),  # a root is its own root
        TreeSample("solo", "", "solo"),
        TreeSample("team", "org", "org"),
    ]


def pending_state() -> ClusterState:
    """``cq`` covers GPUs, cpu and memory with no quota: everything sent there waits."""
    s = state()
    s.core.upsert_flavor(make_flavor("a100"))
    s.core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(
            make_flavor_quotas("a100")
            .resource("nvidia.com/gpu", 0)
            .resource("cpu", 0)
            .resource("memory", 0)
            .obj()
        )
        .obj()
    )
    s.core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    put(s.cluster_queues, "cq", cq_obj("cq", resources=("nvidia.com/gpu", "cpu", "memory")))
    put(s.cluster_queues, "idle", cq_obj("idle", resources=("cpu",)))
    for name, count in (("two", 2), ("one", 1)):
        s.core.add_workload(
            make_workload(name)
            .queue("lq")
            .count(count)
            .request("nvidia.com/gpu", 1)
            .request("cpu", "500m")
            .obj()
        )
    run_until_quiet(s.core, now=1)
    return s


def test_pending_requests_are_count_times_requests_and_a_covered_resource_shows_zero() -> None:
    assert pending_resources(pending_state()) == {
        "cq": {"nvidia.com/gpu": 3.0, "cpu": 1.5, "memory": 0.0},
        "idle": {"cpu": 0.0},
    }


def wl(name: str, queue: str = "lq", **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"queueName": queue},
    }
    if status:
        obj["status"] = status
    return obj


def cond(kind: str, status: str, reason: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": ""}


def unadmitted_state() -> ClusterState:
    s = state()
    put(s.local_queues, "ns/lq", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}})
    reserved = {"clusterQueue": "cq", "podSetAssignments": []}
    for name, obj in (
        ("new", wl("new")),
        ("waits", wl("waits", conditions=[cond(C.QUOTA_RESERVED, "False", "WaitingForQuota")])),
        (
            "waits-too",
            wl("waits-too", conditions=[cond(C.QUOTA_RESERVED, "False", "WaitingForQuota")]),
        ),
        (
            "checking",
            wl("checking", admission=reserved, conditions=[cond(C.QUOTA_RESERVED, "True", "x")]),
        ),
        ("lost", wl("lost", queue="gone")),
        (
            "running",
            wl(
                "running",
                admission=reserved,
                conditions=[cond(C.QUOTA_RESERVED, "True", "x"), cond(C.ADMITTED, "True", "x")],
            ),
        ),
        ("done", wl("done", conditions=[cond(C.FINISHED, "True", "Succeeded")])),
    ):
        put(s.workloads, f"ns/{name}", obj)
    deleting = wl("deleting")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    put(s.workloads, "ns/deleting", deleting)
    return s


def test_unadmitted_workloads_say_why_and_what_keeps_them() -> None:
    samples = sorted(
        unadmitted_samples(unadmitted_state()),
        key=lambda x: (x.underlying_cause, x.cluster_queue),
    )
    lq = ("lq", "ns")
    assert samples == [
        UnadmittedSample("cq", lq, "UnsatisfiedAdmissionChecks", ""),  # quota held, checks wait
        UnadmittedSample("", None, "NoReservation", "PendingEvaluation"),  # its LocalQueue is gone
        UnadmittedSample("cq", lq, "NoReservation", "PendingEvaluation"),  # never evaluated
        UnadmittedSample("cq", lq, "NoReservation", "WaitingForQuota"),
        UnadmittedSample("cq", lq, "NoReservation", "WaitingForQuota"),
    ]


def scraped(m: Metrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    body, _ = m.exposition()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "replica_role"))
            out.setdefault(sample.name, {})[labels] = sample.value
    return out


def test_a_scrape_reports_unadmitted_workloads_only_with_upstreams_gate() -> None:
    s = unadmitted_state()
    m = Metrics()
    set_queue_metrics(m, s)
    assert "kueue_unadmitted_workloads" not in scraped(m)

    s.unadmitted_workloads_observability = True
    set_queue_metrics(m, s)
    got = scraped(m)
    cq = {dict(k)["underlying_cause"]: v for k, v in got["kueue_unadmitted_workloads"].items()}
    assert cq == {"": 1, "PendingEvaluation": 1, "WaitingForQuota": 2}  # "lost" has no queue
    lq = got["kueue_local_queue_unadmitted_workloads"]
    assert sum(lq.values()) == 4 and all(dict(k)["name"] == "lq" for k in lq)

    set_queue_metrics(m, None)  # a standby: nothing left behind
    got = scraped(m)
    assert "kueue_unadmitted_workloads" not in got
    assert "kueue_cluster_queue_info" not in got


def test_a_scrape_reports_the_tree_and_pending_requests() -> None:
    s = pending_state()
    put(s.cohorts, "team", cohort_obj("team"))
    s.cluster_queues.cache["cq"]["spec"]["cohortName"] = "team"
    m = Metrics()
    set_queue_metrics(m, s)
    got = scraped(m)
    assert got["kueue_cluster_queue_info"] == {
        (("cluster_queue", "cq"), ("parent_cohort", "team"), ("root_cohort", "team")): 1.0,
        (("cluster_queue", "idle"), ("parent_cohort", ""), ("root_cohort", "")): 1.0,
    }
    assert got["kueue_cohort_info"] == {
        (("cohort", "team"), ("parent_cohort", ""), ("root_cohort", "team")): 1.0
    }
    pending = got["kueue_cluster_queue_resource_pending"]
    assert pending[(("cluster_queue", "cq"), ("resource", "nvidia.com/gpu"))] == 3.0
    assert pending[(("cluster_queue", "idle"), ("resource", "cpu"))] == 0.0
