"""`kfed submit` on the real manager apiserver: Jobs are created suspended and labelled; with
--wait-placement it follows the Job's Workload until the MultiKueue check is Ready (the
Workload's status is written here, as the kfed manager would)."""

from __future__ import annotations

import pytest

from manager.api import constants as C
from manager.kube import resources as R
from tests.integration.cli import objects
from tests.integration.cli.conftest import Cleanup, Kfed, Kube, namespace

pytestmark = pytest.mark.integration


@pytest.fixture
def queue_ns(manager: Kube, cleanup: Cleanup, unique: str) -> str:
    ns = namespace(manager, cleanup, f"submit-{unique}")
    manager.create(R.LOCAL_QUEUES, objects.local_queue(ns, "gpu-lq", f"cq-{unique}"))
    cleanup.add(manager, R.LOCAL_QUEUES, "gpu-lq", ns)
    return ns


def _jobs(manager: Kube, ns: str) -> list[str]:
    return manager(lambda api: api.list(R.JOBS, ns))["items"]  # type: ignore[no-any-return]


def test_submit_creates_a_suspended_labelled_job(
    kfed: Kfed, manager: Kube, cleanup: Cleanup, queue_ns: str
) -> None:
    cleanup.add(manager, R.JOBS, "light-job", queue_ns)
    manifest = objects.job_yaml(queue_ns, "light-job")

    result = kfed("submit", "-", "--queue", "gpu-lq", "--no-wait", input=manifest)

    assert result.exit_code == 0, result.output
    assert f"created Job {queue_ns}/light-job (queue gpu-lq" in result.stdout
    job = manager.get(R.JOBS, "light-job", queue_ns)
    assert job is not None
    assert job["metadata"]["labels"][C.QUEUE_NAME_LABEL] == "gpu-lq"
    assert job["spec"]["suspend"] is True

    again = kfed("submit", "-", "--queue", "gpu-lq", "--no-wait", input=manifest)
    assert again.exit_code == 1
    assert "already exists" in again.stderr


def test_a_missing_local_queue_or_a_bad_document_creates_nothing(
    kfed: Kfed, manager: Kube, queue_ns: str
) -> None:
    result = kfed(
        "submit",
        "-",
        "--queue",
        "no-such-queue",
        "--no-wait",
        input=objects.job_yaml(queue_ns, "j1"),
    )
    assert result.exit_code == 2
    assert f"LocalQueue {queue_ns}/no-such-queue not found" in result.stderr

    good = objects.job_yaml(queue_ns, "j2")
    bad = (
        "apiVersion: batch/v1\nkind: Job\n"
        f"metadata: {{name: j3, namespace: {queue_ns}}}\nspec: {{}}\n"
    )
    result = kfed("submit", "-", "--queue", "gpu-lq", "--no-wait", input=f"{good}---\n{bad}")
    assert result.exit_code == 2
    assert "document 2 (Job j3) is not a valid Job: spec.template" in result.stderr
    assert _jobs(manager, queue_ns) == []


def test_submit_waits_for_placement_and_prints_the_cluster(
    kfed: Kfed, manager: Kube, cleanup: Cleanup, queue_ns: str, unique: str
) -> None:
    check = f"mk-{unique}"
    manager.create(R.ADMISSION_CHECKS, objects.multikueue_check(check, f"cfg-{unique}"))
    cleanup.add(manager, R.ADMISSION_CHECKS, check)
    # The Job names a prebuilt Workload, so the Workload can be arranged before the Job.
    placed, waiting = f"wl-placed-{unique}", f"wl-waiting-{unique}"
    for name in (placed, waiting):
        manager.create(R.WORKLOADS, objects.workload(queue_ns, name, "gpu-lq"))
        cleanup.add(manager, R.WORKLOADS, name, queue_ns)
    manager.patch_status(
        R.WORKLOADS,
        placed,
        objects.reserved_status(
            f"cq-{unique}", "h100", check, state="Ready", message="admitted", cluster="worker-2"
        ),
        queue_ns,
    )
    manager.patch_status(
        R.WORKLOADS,
        waiting,
        objects.pending_status("insufficient unused quota for nvidia.com/gpu in flavor h100"),
        queue_ns,
    )
    for name in ("heavy-job", "waiting-job"):
        cleanup.add(manager, R.JOBS, name, queue_ns)

    heavy = objects.job_yaml(
        queue_ns, "heavy-job", gpus=4, labels={C.PREBUILT_WORKLOAD_LABEL: placed}
    )
    result = kfed("submit", "-", "--queue", "gpu-lq", "--timeout", "20s", input=heavy)
    assert result.exit_code == 0, result.output
    assert f"{queue_ns}/heavy-job -> worker-2" in result.stdout

    stuck = objects.job_yaml(queue_ns, "waiting-job", labels={C.PREBUILT_WORKLOAD_LABEL: waiting})
    result = kfed("submit", "-", "--queue", "gpu-lq", "--timeout", "500ms", input=stuck)
    assert result.exit_code == 1
    assert (
        f"{queue_ns}/waiting-job: not placed after 0.5s: pending: insufficient unused quota"
        in result.stderr
    )
    assert manager.get(R.JOBS, "waiting-job", queue_ns) is not None, "it stays queued"
