"""A workload's page: its timeline from the objects the clusters keep, and the page itself
(every value escaped)."""

from __future__ import annotations

import json
from typing import Any

from manager.observability.workloadpage import WorkloadDetails, render, timeline


def workload(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "job-light-job-3f2a1",
            "namespace": "ml-jobs",
            "creationTimestamp": "2026-12-02T10:00:00Z",
            "ownerReferences": [{"kind": "Job", "name": "light-job", "apiVersion": "batch/v1"}],
            "annotations": {
                "kfed.io/placement": json.dumps(
                    {
                        "cluster": "worker-1",
                        "reason": "fits in gpu-cq",
                        "rule": "best fit",
                        "candidates": ["worker-1: fits", "worker-2: no flavor rtx-a1000"],
                        "at": 1764669601,
                    }
                )
            },
        },
        "spec": {"queueName": "gpu-lq"},
        "status": status,
    }


def event(reason: str, at: str, message: str, **kw: Any) -> dict[str, Any]:
    return {"reason": reason, "lastTimestamp": at, "message": message, "type": "Normal", **kw}


EVENTS = [
    event(
        "Failover", "2026-12-02T10:00:20Z", 'Leaving "worker-1" (lost): unreachable', type="Warning"
    ),
    event("QuotaReserved", "2026-12-02T10:00:01Z", "Quota reserved in ClusterQueue gpu-cq"),
    event("Dispatched", "2026-12-02T10:00:01Z", 'Sent to "worker-1": fits in gpu-cq'),
    event("CreatedWorkload", "2026-12-02T10:00:00Z", "Created Workload: ml-jobs/x"),
    event(
        "Dispatched",
        "2026-12-02T10:00:21Z",
        'Sent to "worker-2": fits (previously sent to "worker-1")',
    ),
    event("FinishedWorkload", "2026-12-02T10:00:40Z", "Workload 'ml-jobs/x' is declared finished"),
]


def test_the_timeline_tells_the_story_in_order() -> None:
    wl = workload(clusterName="worker-2")
    job = {"metadata": {"name": "light-job"}, "status": {"startTime": "2026-12-02T10:00:25Z"}}
    moments = timeline(wl, job, EVENTS)
    assert [m.what for m in moments] == [
        "Submitted",
        "Quota reserved",
        "Dispatched",
        "Failover",
        "Dispatched",
        "Running",
        "Finished",
    ]
    assert moments[3].tone == "bad" and "lost" in moments[3].detail
    assert moments[5].detail == "the Job started (status.startTime)"


def test_a_finish_without_its_event_comes_from_the_condition() -> None:
    wl = workload(
        conditions=[
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Job finished successfully",
                "lastTransitionTime": "2026-12-02T10:01:00Z",
            }
        ]
    )
    moments = timeline(wl, None, [])
    assert [m.what for m in moments] == ["Submitted", "Finished"]
    assert moments[-1].detail == "Succeeded: Job finished successfully"


def test_events_without_a_time_are_left_out_and_folded_ones_counted() -> None:
    moments = timeline(
        workload(),
        None,
        [
            {"reason": "Pending", "message": "no quota"},
            event(
                "Pending",
                "2026-12-02T10:00:09Z",
                "no quota",
                count=4,
                firstTimestamp="2026-12-02T10:00:05Z",
            ),
        ],
    )
    assert [(m.what, m.count) for m in moments] == [
        ("Submitted", 1),
        ("Waiting", 1),
        ("Waiting", 4),
    ]


def test_the_page_shows_the_decision_and_escapes_everything() -> None:
    wl = workload(clusterName="worker-1")
    wl["spec"]["queueName"] = "<script>alert(1)</script>"
    page = render(
        WorkloadDetails(wl, None, EVENTS, trace_url="http://jaeger:16686/trace/abc?x=1&y=2")
    )
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "worker-2: no flavor rtx-a1000" in page and "best fit" in page
    assert 'href="http://jaeger:16686/trace/abc?x=1&amp;y=2"' in page
    assert page.index("Quota reserved") < page.index("Failover")


def test_without_a_trace_ui_the_page_says_how_to_configure_one() -> None:
    assert "--trace-url" in render(WorkloadDetails(workload()))


def test_a_workload_placed_by_topology_shows_its_racks_and_hosts() -> None:
    assigned = {"levels": ["kubernetes.io/hostname"], "slices": []}
    admission = {"podSetAssignments": [{"name": "trainers", "topologyAssignment": assigned}]}
    wl = workload(clusterName="worker-3", admission=admission)
    placed = {
        "cluster": "worker-3",
        "levels": ["cloud.provider.com/topology-rack", "kubernetes.io/hostname"],
        "podSets": {"trainers": [[["<r1>", "h0"], 4], [["<r1>", "h1"], 4]]},
    }
    wl["metadata"]["annotations"]["kfed.io/topology"] = json.dumps(placed)
    page = render(WorkloadDetails(wl))
    assert "<td>Topology</td>" in page
    assert "on worker-3 (rack / host)<br>trainers: &lt;r1&gt; / h0 x4, &lt;r1&gt; / h1 x4" in page
    assert "<td>Topology</td>" not in render(WorkloadDetails(workload()))
