"""API requests per workload in the federation benchmark: the apiserver's counter read,
the windows between reads, the idle background taken off, per cluster and per worker."""

from __future__ import annotations

import json

from e2e.bench.federation import apirequests
from e2e.bench.federation.apirequests import ApiRequests, Snapshot, difference, parse
from e2e.bench.federation.report import Report, dumps, render
from tests.unit.bench.test_federation_report import mode


def line(verb: str, resource: str, value: float, *, sub: str = "", code: str = "200") -> str:
    return (
        f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",'
        f'group="kueue.x-k8s.io",resource="{resource}",scope="namespace",'
        f'subresource="{sub}",verb="{verb}",version="v1beta1"}} {value}'
    )


def test_the_counter_is_summed_over_codes_and_groups_and_failures_kept_apart() -> None:
    text = "\n".join(
        [
            "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
            "# TYPE apiserver_request_total counter",
            line("PATCH", "workloads", 7, sub="status"),
            line("PATCH", "workloads", 2, sub="status", code="409"),
            line("POST", "jobs", 3),
            'apiserver_request_total{code="200",component="",dry_run="",group="",resource="",'
            'scope="",subresource="/metrics",verb="GET",version=""} 4',
            'apiserver_request_total_other{code="200",verb="GET",resource="x"} 99',
            'apiserver_request_duration_seconds_count{verb="GET",resource="jobs"} 50',
        ]
    )
    snap = parse(text)
    assert snap.requests == {"PATCH workloads/status": 9, "POST jobs": 3, "GET /metrics": 4}
    assert snap.failed == {"PATCH workloads/status -> 409": 2}


def test_a_window_is_what_was_added_and_a_restarted_apiserver_counts_from_zero() -> None:
    before = {"PUT leases": 10, "POST jobs": 5, "GET pods": 3}
    after = {"PUT leases": 16, "POST jobs": 5, "GET pods": 1, "POST pods": 2}
    assert difference(before, after) == {"PUT leases": 6, "GET pods": 1, "POST pods": 2}


def snap(**counts: int) -> Snapshot:
    return Snapshot({k.replace("_", " "): v for k, v in counts.items()})


def bench_requests() -> ApiRequests:
    """Idle 10 s, measured 20 s: the manager renews a lease once a second throughout."""
    zero = snap()
    manager_idle = snap(PUT_leases=10)
    manager_end = snap(PUT_leases=30, POST_jobs=4, PATCH_workloads=8)
    worker_idle = snap(PUT_leases=5)
    reads = {
        "manager": (zero, manager_idle, manager_end),
        "worker-1": (zero, worker_idle, snap(PUT_leases=15, POST_workloads=3, POST_pods=3)),
        "worker-2": (zero, worker_idle, snap(PUT_leases=15, POST_workloads=1, POST_pods=1)),
        "worker-3": (zero, worker_idle, snap(PUT_leases=15, DELETE_workloads=2)),
    }
    return ApiRequests.of(
        reads,
        manager="manager",
        workloads=4,
        placements={"worker-1": 3, "worker-2": 1},
        idle_seconds=10.0,
        window_seconds=20.0,
    )


def test_per_workload_net_of_the_idle_background() -> None:
    r = bench_requests()
    m = r.manager
    assert [c.name for c in r.clusters] == ["manager", "worker-1", "worker-2", "worker-3"]
    assert m.requests == 32  # 20 lease renewals, 4 creates, 8 patches
    assert m.background() == 20.0  # 10 in 10 s idle, scaled to the 20 s window
    assert m.per_workload(m.requests) == 8.0
    assert m.per_workload(m.net()) == 3.0
    assert m.top() == [("PATCH workloads", 2.0), ("POST jobs", 1.0)]  # leases net to 0
    assert m.top_background() == [("PUT leases", 1.0)]
    w1, w2, w3 = r.workers
    assert (w1.workloads, w2.workloads, w3.workloads) == (3, 1, 0)
    assert w1.per_workload(w1.net()) == 2.0
    assert w3.per_workload(w3.net()) is None and w3.net() == 2.0 and w3.top() == []
    chosen = r.chosen_worker()
    assert chosen.workloads == 4 and chosen.net() == 8.0  # worker-3 ran nothing: left out
    every = r.all_workers()
    assert every.workloads == 4 and every.net() == 10.0  # also copies not run


def test_the_report_shows_and_saves_the_requests_per_workload() -> None:
    result = mode("capacity-aware", copies={1: 4})
    result.api_requests = bench_requests()
    result.idle_cpu_seconds = {"kfed manager": 0.5}
    report = Report(settings={}, modes=[result])
    data = json.loads(dumps(report))["modes"][0]
    assert data["idle_cpu_seconds"] == {"kfed manager": 0.5}
    requests = data["api_requests"]
    assert requests["window_seconds"] == 20.0 and requests["idle_window_seconds"] == 10.0
    manager = requests["clusters"]["manager"]
    assert manager["per_workload"] == 8.0 and manager["net_per_workload"] == 3.0
    assert manager["background_per_second"] == 1.0
    assert manager["top_net_per_workload"] == {"PATCH workloads": 2.0, "POST jobs": 1.0}
    assert manager["by_request"]["PUT leases"] == {
        "requests": 20,
        "idle": 10,
        "net_per_workload": 0.0,
    }
    assert requests["clusters"]["chosen worker"]["net_per_workload"] == 2.0
    assert requests["clusters"]["worker-3"]["net_per_workload"] is None
    text = render(report, width=200)
    assert "API requests per workload, capacity-aware" in text
    assert "net per workload, manager: PATCH workloads 2.00, POST jobs 1.00" in text
    assert "idle manager: 1.0 requests/s (PUT leases 1.00)" in text
    assert "chosen worker" in text and "workers (all)" in text


def test_without_an_idle_window_there_is_no_background() -> None:
    c = apirequests.ClusterRequests(
        name="manager",
        workloads=2,
        measured=snap(POST_jobs=2),
        idle=snap(),
        window_seconds=5.0,
        idle_seconds=0.0,
    )
    assert c.background() == 0.0 and c.per_workload(c.net()) == 1.0
    assert c.top_background() == []
