"""The MultiKueue benchmark's measures, by upstream's definitions: nearest-rank percentiles,
latencies from just before each create to the state first seen on the watch, throughput
from the first create to the last admission; and its objects in upstream's baseline shape."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.bench.multikueue import report, shape
from e2e.bench.multikueue.recorder import AdmissionRecorder, Durations, nearest_rank
from e2e.bench.multikueue.run import ModeResult
from manager.api import constants as C


def workload(job: str, *true: str, check: str | None = None, cluster: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": t, "status": "True"} for t in true]}
    if C.QUOTA_RESERVED in true:
        status["admission"] = {"clusterQueue": shape.CLUSTER_QUEUE}
    if check is not None:
        status["admissionChecks"] = [{"name": "multikueue", "state": check}]
    if cluster:
        status["clusterName"] = cluster
    return {
        "metadata": {
            "name": f"job-{job}-abcde",
            "namespace": "mk-perf-all-at-once",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job, "controller": True}
            ],
        },
        "status": status,
    }


def test_percentiles_are_upstreams_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert nearest_rank(values, 0.50) == 50
    assert nearest_rank(values, 0.95) == 95
    assert nearest_rank(values, 0.99) == 99
    assert nearest_rank([7.0], 0.99) == 7
    assert nearest_rank([], 0.5) == 0.0
    # Nearest rank never interpolates: p50 of two values is the lower one.
    assert nearest_rank([1.0, 2.0], 0.5) == 1.0


def test_durations_are_in_milliseconds() -> None:
    d = Durations.of([0.1, 0.2, 0.3, 0.4])
    assert d.count == 4
    assert d.min_ms == pytest.approx(100)
    assert d.max_ms == pytest.approx(400)
    assert d.p50_ms == pytest.approx(200)
    assert d.to_json()["p95Ms"] == 400.0


def test_latencies_start_before_the_create_and_end_when_first_seen() -> None:
    rec = AdmissionRecorder("multikueue")
    rec.creating("mk-00000", 10.0)
    rec.manager_event(workload("mk-00000"), 10.1)
    rec.manager_event(workload("mk-00000", C.QUOTA_RESERVED), 10.3)
    rec.manager_event(workload("mk-00000", C.QUOTA_RESERVED), 10.4)  # seen again: ignored
    rec.manager_event(
        workload("mk-00000", C.QUOTA_RESERVED, check="Ready", cluster="worker-2"), 11.0
    )
    rec.manager_event(
        workload("mk-00000", C.QUOTA_RESERVED, C.ADMITTED, check="Ready", cluster="worker-2"),
        11.5,
    )
    assert rec.admitted() == 1
    assert rec.quota_reservation().p50_ms == pytest.approx(300)
    assert rec.dispatch().p50_ms == pytest.approx(700)
    assert rec.admission().p50_ms == pytest.approx(1500)
    assert rec.distribution() == {"worker-2": 1}


def test_throughput_runs_from_the_first_create_to_the_last_admission() -> None:
    rec = AdmissionRecorder("multikueue")
    for i in range(4):
        rec.creating(f"mk-{i:05d}", float(i))
    for i in range(4):
        rec.manager_event(workload(f"mk-{i:05d}", C.QUOTA_RESERVED, C.ADMITTED), 8.0 + i)
    # 4 admitted between t=0 (first create) and t=11 (last admission).
    assert rec.throughput() == pytest.approx(4 / 11)
    assert rec.span() == (0.0, 3.0, 11.0)


def test_nothing_admitted_is_zero_throughput_not_an_error() -> None:
    rec = AdmissionRecorder("multikueue")
    rec.creating("mk-00000", 1.0)
    assert rec.throughput() == 0.0
    assert rec.span() is None


def test_workloads_that_no_job_owns_are_not_counted() -> None:
    rec = AdmissionRecorder("multikueue")
    orphan = workload("x", C.QUOTA_RESERVED, C.ADMITTED)
    orphan["metadata"]["ownerReferences"] = []
    rec.manager_event(orphan, 1.0)
    assert rec.admitted() == 0


def test_the_shape_is_upstreams_baseline() -> None:
    objects = dict((res.plural, body) for res, body in shape.queues("ns", 1000, check=True))
    quota = objects["clusterqueues"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota == {"name": "cpu", "nominalQuota": "1000m"}
    strategy = objects["clusterqueues"]["spec"]["admissionChecksStrategy"]
    assert strategy == {"admissionChecks": [{"name": "multikueue"}]}
    worker = dict((res.plural, body) for res, body in shape.queues("ns", 1000, check=False))
    assert "admissionChecksStrategy" not in worker["clusterqueues"]["spec"]
    job = shape.job("ns", 7, "all-at-once")
    assert job["spec"]["suspend"] is True
    assert job["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "1m"}
    assert job["metadata"]["labels"][C.QUEUE_NAME_LABEL] == shape.LOCAL_QUEUE


def test_the_report_counts_writes_and_the_ceiling() -> None:
    mode = ModeResult(mode="capacity-aware", workloads=10, creators=1, admitted=10)
    mode.throughput = 20.0
    mode.requests = {
        "manager": {"POST jobs": 10, "PATCH workloads/status": 20, "GET workloads": 5},
        "worker-1": {"POST workloads": 10, "PATCH workloads/status": 10},
    }
    assert mode.per_workload("manager") == pytest.approx(3.5)
    assert mode.per_workload("manager", writes_only=True) == pytest.approx(3.0)
    assert report.writes_per_workload(mode) == pytest.approx(5.0)
    ceiling = report.Ceiling(creates_per_second=600, status_patches_per_second=400)
    assert report.ceiling_of(mode, ceiling) == pytest.approx(100.0)
    out = report.Report(settings={}, modes=[mode], ceiling=ceiling)
    data = report.to_json(out)
    assert data["modes"][0]["share_of_ceiling"] == pytest.approx(0.2)
    assert data["passed"] is True
    text = report.render(out)
    assert "capacity-aware" in text and "20.0" in text


def test_a_py_spy_profile_is_summed_per_function() -> None:
    from e2e.bench.multikueue.profile import Profile, frame_name

    assert (
        frame_name("_reconcile (/work/main/manager/federation/engine/dispatch.py:187)")
        == "federation/engine/dispatch.py:_reconcile"
    )
    raw = "\n".join(
        [
            "run (asyncio/runners.py:118);_reconcile (manager/federation/engine/dispatch.py:187);"
            "loads (json/__init__.py:346) 30",
            "run (asyncio/runners.py:118);"
            "_reconcile (manager/federation/engine/dispatch.py:187) 10",
            "run (asyncio/runners.py:118);select (selectors.py:468) 60",
            "garbage line",
        ]
    )
    profile = Profile.parse(raw)
    assert profile.samples == 100
    assert dict(profile.top(3, inclusive=False))["json/__init__.py:loads"] == 0.3
    assert dict(profile.top(5))["federation/engine/dispatch.py:_reconcile"] == 0.4
    assert "federation/engine/dispatch.py:_reconcile" in profile.render()


def test_ten_workers_or_more_keep_e2e_locals_order() -> None:
    from e2e.bench.federation.topology import Topology
    from e2e.local.federation import worker_names

    topology = Topology(worker_flavors={w: ("default",) for w in worker_names(12)})
    assert topology.workers == worker_names(12)  # worker-2 before worker-10


def test_a_curve_point_is_read_from_one_runs_report() -> None:
    from e2e.bench.multikueue import curve

    report = {
        "modes": [
            {
                "mode": "capacity-aware",
                "complete": True,
                "admitted": 1000,
                "throughput": 25.04,
                "admission": {"p95Ms": 6500.0},
                "quota_reservation": {"p95Ms": 2100.0},
                "processes": {
                    "kfed manager": {"cpu_seconds": 15.0, "peak_rss_mib": 230.4},
                    "kube-apiserver manager": {"cpu_seconds": 30.0, "peak_rss_mib": 800},
                    "kube-apiserver worker-1": {"cpu_seconds": 18.0, "peak_rss_mib": 400},
                },
                "requests_per_workload": {"manager": 6.3},
            }
        ]
    }
    point = curve.point(report, 1000, 3)
    assert point["manager_cpu_ms_per_workload"] == 15.0
    assert point["apiservers_cpu_ms_per_workload"] == 48.0
    assert point["manager_peak_rss_mib"] == 230
    text = curve.render([point, {"jobs": 5000, "workers": 3, "complete": False}])
    assert "25.0" in text and "incomplete" in text


def test_an_incomplete_curve_point_says_why() -> None:
    from e2e.bench.multikueue import curve

    report = {
        "modes": [
            {
                "mode": "capacity-aware",
                "complete": False,
                "error": "2310/10000 admitted when the manager exited\nlog tail",
                "admitted": 2310,
                "throughput": 2.31,
                "admission": {"p95Ms": 1.0},
                "quota_reservation": {"p95Ms": 1.0},
                "processes": {},
                "requests_per_workload": {},
            }
        ]
    }
    point = curve.point(report, 10000, 20)
    assert point["error"].startswith("2310/10000 admitted")
    assert "incomplete 2310/10000 admitted when the manager exited" in curve.render([point])
