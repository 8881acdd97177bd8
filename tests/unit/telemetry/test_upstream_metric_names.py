"""kfed's /metrics against upstream's: every upstream Kueue v0.17.0 and v0.19.2 metric that
applies to kfed, MultiKueue's (newest release, and the two merged since), and
controller-runtime's, with upstream's names, types, label sets and histogram buckets.

The lists are ``tests/data/upstream-metrics-v0.17.0.json`` and ``-v0.19.2.json``, extracted
from upstream's source (``python -m e2e.upstream_metrics``; each one's ``origin`` says from
where). A Metrics object is driven through every recording method and state setter, with a
real work queue and the kube sink installed, and its exposition parsed as Prometheus reads it.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from manager.kube import instrument
from manager.kube.workqueue import WorkQueue
from manager.telemetry.metrics import (
    ClusterQueueSample,
    LocalQueueSample,
    LocalQueueUsageSample,
    Metrics,
    QuotaSample,
    TreeSample,
    UnadmittedSample,
    WorkerClusterSample,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "upstream-metrics-v0.17.0.json"
DATA_V0192 = DATA.with_name("upstream-metrics-v0.19.2.json")
LISTS = pytest.mark.parametrize("data", [DATA, DATA_V0192], ids=lambda p: p.stem[-7:])
WORKLOAD: dict[str, Any] = {
    "metadata": {"name": "job-a", "namespace": "team-a"},
    "spec": {"queueName": "lq-a", "priorityClassName": "high"},
}


def upstream(path: Path = DATA) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    return [*data["kueue"], *data["multikueue"], *data["controller_runtime"]]


QUEUE = "metrics-test-workloads"
"""A name no other test's queue has: live queues of earlier tests are read at scrape time too."""


async def drive_work_queue() -> WorkQueue:
    """A key processed successfully, one failing (retried), one asking to come back."""
    queue = WorkQueue(name=QUEUE, backoff_initial=60)
    for key in ("a", "b", "c"):
        queue.add(key)
    for outcome in ("success", "error", "requeue_after"):
        key = await queue.get()
        if outcome == "error":
            queue.retry(key)
        elif outcome == "requeue_after":
            queue.add_after(key, 60)
        queue.done(key)
    queue.add("d")
    queue.add("e")
    await queue.get()  # "d" in flight while scraped, "e" waits: "b" and "c" are delayed
    return queue  # live queues are weakly held: the caller keeps it until it has scraped


def exercise(m: Metrics) -> None:
    m.set_leader("replica-a", True, election="kfed-manager-leader")
    m.set_cluster_queues(
        [
            ClusterQueueSample(
                name="gpu-cq",
                cohort="team",
                status="active",
                pending_active=2,
                pending_inadmissible=1,
                reserving=3,
                admitted=2,
                quotas=(
                    QuotaSample(
                        "h100",
                        "nvidia.com/gpu",
                        nominal=8,
                        usage=2,
                        borrowing_limit=4,
                        reserved=3,
                        lending_limit=2,
                    ),
                ),
                finished=5,
                weighted_share=0.25,
                cohorts=("team", "org"),
            )
        ],
        local_queues=[
            LocalQueueSample(
                "team-a",
                "lq-a",
                "True",
                2,
                1,
                3,
                2,
                finished=5,
                usage=(LocalQueueUsageSample("h100", "nvidia.com/gpu", reserved=3, usage=2),),
            )
        ],
        cohort_shares={"team": 0.1},
    )
    m.scheduling_cycle(admitted=1, seconds=0.001)
    m.quota_reserved("gpu-cq", waited=1.5, workload=WORKLOAD)
    m.admitted("gpu-cq", waited=2.0, workload=WORKLOAD, checks_waited=0.5, cohorts=("team", "org"))
    m.evicted("gpu-cq", "Preempted", workload=WORKLOAD)
    m.preempted("gpu-cq", "InClusterQueue")
    m.finished("gpu-cq", workload=WORKLOAD)
    m.remote_object_created("worker-1", "Workload", cluster_queue="gpu-cq")
    m.admitted_remotely("gpu-cq", "worker-1")
    m.evicted_remotely("gpu-cq", "worker-1", "Preempted")
    m.set_multikueue_clusters([("gpu-cq", "worker-1", "True")])
    m.set_clusters([WorkerClusterSample("worker-1", active=True, maintenance="cordon")])
    m.rest_request("127.0.0.1:6443", "GET", "200")
    # upstream's v0.18 and v0.19 additions
    m.set_queue_tree([TreeSample("gpu-cq", "team", "org")], [TreeSample("team", "org", "org")])
    m.set_pending_resources({"gpu-cq": {"nvidia.com/gpu": 4.0, "cpu": 0.0}})
    m.set_unadmitted(
        [UnadmittedSample("gpu-cq", ("lq-a", "team-a"), "NoReservation", "WaitingForQuota")]
    )
    m.eviction_released("gpu-cq", "Preempted", seconds=3.0)
    m.workload_created("Job", seconds=0.05)
    m.scheduling_gate_removed("kueue.x-k8s.io/topology", "gpu-cq", seconds=0.2)


def scrape(m: Metrics) -> dict[str, dict[str, Any]]:
    """name as upstream spells it -> type, label names, buckets, series."""
    body, _ = m.exposition()
    found: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(body.decode()):
        name = family.name + ("_total" if family.type == "counter" else "")
        labels: set[str] = set()
        buckets: set[float] = set()
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels |= set(sample.labels) - {"le"}
            if sample.name.endswith("_bucket"):
                buckets.add(float(sample.labels["le"]))
        found[name] = {
            "type": family.type,
            "labels": labels,
            "buckets": sorted(b for b in buckets if not math.isinf(b)),
            "samples": family.samples,
        }
    return found


def served() -> dict[str, dict[str, Any]]:
    m = Metrics()
    with instrument.installed(m):

        async def run() -> dict[str, dict[str, Any]]:
            exercise(m)
            queue = await drive_work_queue()
            got = scrape(m)
            queue.close()
            return got

        return asyncio.run(run())


@LISTS
def test_every_applicable_upstream_metric_is_served_with_upstream_names_types_and_labels(
    data: Path,
) -> None:
    got = served()
    problems = []
    for want in upstream(data):
        name = want["name"]
        if want.get("not_applicable"):
            if name in got:
                problems.append(f"{name}: marked not applicable, yet served")
            continue
        have = got.get(name)
        if have is None:
            problems.append(f"{name}: missing")
            continue
        if have["type"] != want["type"]:
            problems.append(f"{name}: type {have['type']}, upstream {want['type']}")
        if have["labels"] != set(want["labels"]):
            problems.append(
                f"{name}: labels {sorted(have['labels'])}, upstream {sorted(want['labels'])}"
            )
        if want["type"] == "histogram" and not all(
            math.isclose(a, b) for a, b in zip(have["buckets"], want["buckets"], strict=False)
        ):
            problems.append(f"{name}: buckets {have['buckets']}, upstream {want['buckets']}")
        if want["type"] == "histogram" and len(have["buckets"]) != len(want["buckets"]):
            problems.append(
                f"{name}: {len(have['buckets'])} buckets, upstream {len(want['buckets'])}"
            )
    assert not problems, "kfed's /metrics differs from upstream's:\n  " + "\n  ".join(problems)


@LISTS
def test_the_data_states_its_origin_and_why_each_skipped_metric_does_not_apply(
    data: Path,
) -> None:
    loaded = json.loads(data.read_text())
    version = data.stem.rsplit("-", 1)[1]
    assert f"sigs.k8s.io/kueue@{version}" in loaded["origin"]["kueue"]
    assert loaded["origin"]["multikueue"]
    for m in upstream(data):
        if "not_applicable" in m:
            assert len(m["not_applicable"]) > 20, m["name"]


def test_the_newer_list_says_which_release_added_each_metric_the_older_lacks() -> None:
    """v0.19.2's list against v0.17.0's: what is new carries ``added_in`` (v0.18.0 or
    v0.19.0), what is not does not, and no v0.17.0 metric is gone."""
    old = {m["name"] for m in json.loads(DATA.read_text())["kueue"]}
    new = json.loads(DATA_V0192.read_text())["kueue"]
    assert old <= {m["name"] for m in new}
    for m in new:
        if m["name"] in old:
            assert "added_in" not in m, m["name"]
        else:
            assert m.get("added_in") in ("v0.18.0", "v0.19.0"), m["name"]


def test_replica_role_values_are_upstreams() -> None:
    m = Metrics()
    assert m.replica_role == "standalone"
    m.set_leader("a", False, election="lease")
    m.scheduling_cycle(admitted=0, seconds=0.01)
    m.set_leader("a", True, election="lease")
    m.scheduling_cycle(admitted=1, seconds=0.01)
    got = scrape(m)
    roles = {
        s.labels["replica_role"]
        for s in got["kueue_admission_attempts_total"]["samples"]
        if s.name.endswith("_total")
    }
    assert roles == {"follower", "leader"}
    status = {s.labels["name"]: s.value for s in got["leader_election_master_status"]["samples"]}
    assert status == {"lease": 1.0}


def test_maintenance_is_one_series_per_state() -> None:
    m = Metrics()
    m.set_clusters([WorkerClusterSample("w1", active=True, maintenance="drain")])
    samples = scrape(m)["kfed_cluster_maintenance"]["samples"]
    assert {s.labels["state"]: s.value for s in samples} == {"none": 0, "cordon": 0, "drain": 1}


def test_work_queue_and_reconcile_series() -> None:
    got = served()
    results = {
        s.labels["result"]: s.value
        for s in got["controller_runtime_reconcile_total"]["samples"]
        if s.name.endswith("_total") and s.labels.get("controller") == QUEUE
    }
    assert results == {"success": 1, "error": 1, "requeue": 0, "requeue_after": 1}
    depth = {s.labels["name"]: s.value for s in got["workqueue_depth"]["samples"]}
    assert depth[QUEUE] == 1
    workers = got["controller_runtime_active_workers"]["samples"]
    active = {s.labels["controller"]: s.value for s in workers}
    assert active[QUEUE] == 1
    build = got["kfed_build_info"]["samples"]
    assert build[0].value == 1
