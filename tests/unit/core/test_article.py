"""The seed article's story (seed/examples/01-03), on the pure core.

Two GPU flavors, one ClusterQueue ``gpu-cq`` covering cpu/memory/nvidia.com/gpu, one
LocalQueue ``ml-jobs/gpu-lq``; a light job for the RTX A1000 nodes and a heavy one for
the H100 nodes; then three light jobs sharing a single RTX GPU.
"""

from __future__ import annotations

from manager.core import (
    AdmissionCore,
    ClusterQueue,
    ClusterQueueName,
    FlavorName,
    PendingKind,
    ResourceName,
    Workload,
    WorkloadState,
)

from .builders import (
    admitted_keys,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
)

GPU_CQ = ClusterQueueName("gpu-cq")


def gpu_cq(rtx_gpus: int = 2) -> ClusterQueue:
    return (
        make_cluster_queue("gpu-cq")
        .resource_group(
            make_flavor_quotas("rtx-a1000")
            .resource("cpu", "32")
            .resource("memory", "128Gi")
            .resource("nvidia.com/gpu", rtx_gpus)
            .obj(),
            make_flavor_quotas("h100")
            .resource("cpu", "64")
            .resource("memory", "512Gi")
            .resource("nvidia.com/gpu", "4")
            .obj(),
        )
        .obj()
    )


def article_core(rtx_gpus: int = 2) -> AdmissionCore:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("rtx-a1000", labels={"gpu.model": "rtx-a1000"}))
    core.upsert_flavor(make_flavor("h100", labels={"gpu.model": "h100"}))
    core.upsert_cluster_queue(gpu_cq(rtx_gpus))
    core.upsert_local_queue(make_local_queue("gpu-lq", "ml-jobs", "gpu-cq"))
    return core


def light_job(name: str = "light-job", created: float = 0.0) -> Workload:
    return (
        make_workload(name, "ml-jobs")
        .queue("gpu-lq")
        .created(created)
        .node_selector("gpu.model", "rtx-a1000")
        .request("cpu", "2")
        .request("memory", "4Gi")
        .request("nvidia.com/gpu", "1")
        .obj()
    )


def heavy_job() -> Workload:
    return (
        make_workload("heavy-job", "ml-jobs")
        .queue("gpu-lq")
        .created(1.0)
        .node_selector("gpu.model", "h100")
        .request("cpu", "8")
        .request("memory", "32Gi")
        .request("nvidia.com/gpu", "1")
        .obj()
    )


def test_light_job_is_assigned_rtx_a1000() -> None:
    core = article_core()
    core.add_workload(light_job())

    result = core.schedule(now=10)

    assert admitted_keys(result) == ["ml-jobs/light-job"]
    (assignment,) = result.admitted[0].admission.pod_set_assignments
    assert set(assignment.flavors.values()) == {"rtx-a1000"}
    assert assignment.resource_usage == {"cpu": 2000, "memory": 4 * 2**30, "nvidia.com/gpu": 1}
    assert result.admitted[0].borrowing is False


def test_heavy_job_is_assigned_h100() -> None:
    core = article_core()
    core.add_workload(heavy_job())

    result = core.schedule(now=10)

    (assignment,) = result.admitted[0].admission.pod_set_assignments
    assert set(assignment.flavors.values()) == {"h100"}


def test_both_jobs_admitted_and_reflected_in_status() -> None:
    core = article_core()
    core.add_workload(light_job())
    core.add_workload(heavy_job())

    first, second = core.schedule(now=10), core.schedule(now=10)

    assert admitted_keys(first) + admitted_keys(second) == [
        "ml-jobs/light-job",
        "ml-jobs/heavy-job",
    ]
    status = core.cluster_queue_status(GPU_CQ)
    assert status is not None
    assert (status.pending, status.reserving, status.admitted) == (0, 2, 0)
    reservation = {
        (f.name, r.name): r.total for f in status.flavors_reservation for r in f.resources
    }
    assert reservation[(FlavorName("rtx-a1000"), ResourceName("nvidia.com/gpu"))] == 1
    assert reservation[(FlavorName("h100"), ResourceName("cpu"))] == 8000


def test_finished_jobs_release_their_quota() -> None:
    core = article_core()
    core.add_workload(light_job())
    core.schedule(now=10)
    core.set_admitted(key("light-job", "ml-jobs"))
    assert core.workload_state(key("light-job", "ml-jobs")) is WorkloadState.ADMITTED

    core.finish(key("light-job", "ml-jobs"))

    status = core.cluster_queue_status(GPU_CQ)
    assert status is not None
    assert (status.reserving, status.admitted) == (0, 0)
    assert all(r.total == 0 for f in status.flavors_reservation for r in f.resources)


def test_three_light_jobs_share_one_rtx_gpu_one_at_a_time() -> None:
    core = article_core(rtx_gpus=1)
    jobs = [light_job(f"light-{i}", created=float(i)) for i in range(3)]
    for job in jobs:
        core.add_workload(job)

    admitted = [a for _ in range(5) for a in admitted_keys(core.schedule(now=10))]

    assert admitted == ["ml-jobs/light-0"]
    for waiting in ("light-1", "light-2"):
        reason = core.pending_reason(key(waiting, "ml-jobs"))
        assert reason is not None
        assert reason.kind is PendingKind.WAITING_FOR_QUOTA
        assert reason.message.startswith(
            "insufficient unused quota for nvidia.com/gpu in flavor rtx-a1000: "
            "1 requested, 0 available"
        )
        assert reason.condition_reason == "Pending"

    # Each job starts only after the previous one finished.
    order = ["ml-jobs/light-0"]
    for step in range(2):
        core.finish(key(order[-1].split("/")[1], "ml-jobs"))
        newly = [a for _ in range(5) for a in admitted_keys(core.schedule(now=20 + step))]
        assert len(newly) == 1
        order += newly
    assert order == ["ml-jobs/light-0", "ml-jobs/light-1", "ml-jobs/light-2"]


def test_pending_reasons_are_reported_once_in_cycle_results() -> None:
    core = article_core(rtx_gpus=1)
    for i in range(2):
        core.add_workload(light_job(f"light-{i}", created=float(i)))

    reported = [p for _ in range(4) for p in core.schedule(now=10).pending]

    assert [p.workload for p in reported] == ["ml-jobs/light-1"]
    assert reported[0].reason.kind is PendingKind.WAITING_FOR_QUOTA


def test_a_job_asking_for_a_missing_local_queue_says_so() -> None:
    core = article_core()
    core.add_workload(make_workload("lost", "ml-jobs").queue("nope").request("cpu", "1").obj())

    result = core.schedule(now=1)

    (pending,) = result.pending
    assert pending.reason.message == "LocalQueue ml-jobs/nope doesn't exist"
    assert pending.reason.condition_reason == "Inadmissible"
