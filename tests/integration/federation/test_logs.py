"""`kfed logs` on the full test bed, where kwok serves the containers' logs (kube-apiserver
fetches them from kwok's server as from a kubelet; every container logs the worker's
``pod_log_file``): a job's log read from the worker it runs on with the manager's
credentials for it, followed until its pod finishes, and the clear failures: not placed yet,
pods gone once it finished, worker unreachable."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from e2e.local.cluster import POD_LOG_TEMPLATE
from e2e.waiting import deadline_scale, wait_for
from manager.cli.main import main
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import NAMESPACE, Bed
from tests.integration.federation.test_dispatch import h100_job, placed

pytestmark = pytest.mark.full
NS = article.NS
KFED = str(Path(sys.executable).with_name("kfed"))
KWOK_LINES = [line.split(" ", 3)[3] for line in POD_LOG_TEMPLATE.read_text().splitlines()]
"""What kwok serves for every container (the CRI log's text, without time and stream)."""


def _args(bed: Bed, *args: str) -> list[str]:
    return [
        KFED,
        "logs",
        *args,
        "--kubeconfig",
        str(bed.fed.kubeconfig("manager")),
        "--kfed-namespace",
        NAMESPACE,
    ]


async def kfed_logs(bed: Bed, *args: str) -> tuple[int, str, str]:
    """`kfed logs ARGS` against the bed's manager, through click's runner (in a thread: the
    command runs its own event loop): (exit code, stdout, stderr)."""
    result = await asyncio.to_thread(
        CliRunner().invoke, main, _args(bed, *args)[1:], prog_name="kfed"
    )
    return result.exit_code, result.stdout, result.stderr


async def running_pod(api: KubeApi, job: str) -> str | None:
    pods = (await api.list(R.PODS, NS, label_selector=f"batch.kubernetes.io/job-name={job}"))[
        "items"
    ]
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return str(running[0]["metadata"]["name"]) if running else None


async def pods_left(api: KubeApi, job: str) -> list[dict[str, Any]]:
    selector = f"batch.kubernetes.io/job-name={job}"
    return list((await api.list(R.PODS, NS, label_selector=selector))["items"])


async def finish(api: KubeApi, pod: str) -> None:
    """Its container exits, as kwok's pod-succeeds Stage would write it (that Stage waits the
    pod's 10 minutes: the test decides when instead)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj = await api.get(R.PODS, pod, NS)
    statuses = [
        {
            "name": c["name"],
            "image": c["image"],
            "ready": False,
            "restartCount": 0,
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": now,
                    "finishedAt": now,
                }
            },
        }
        for c in obj["spec"]["containers"]
    ]
    status = {"phase": "Succeeded", "containerStatuses": statuses}
    await api.patch(R.PODS, pod, {"status": status}, NS, subresource="status")


def cri_line(text: str) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    return f"{now} stdout F {text}\n"


async def started(bed: Bed) -> None:
    for worker in ("worker-1", "worker-2"):
        await bed.start_shim(worker)
    await bed.start_manager()


async def test_a_job_not_placed_yet_has_no_logs_and_says_why(article_bed: Bed) -> None:
    bed = article_bed
    await started(bed)
    # 16 H100 GPUs: more than the manager's whole quota, so it stays in its queue.
    await bed.manager_api.create(R.JOBS, h100_job("too-big", gpus=16), NS)

    async def pending_with_reason() -> bool:
        job = await bed.manager_api.get(R.JOBS, "too-big", NS)
        name = ws.workload_name_for_job("too-big", job["metadata"]["uid"])
        items = (await bed.manager_api.list(R.WORKLOADS, NS))["items"]
        return any(
            w["metadata"]["name"] == name and ws.status_of(w).get("conditions") for w in items
        )

    await wait_for(pending_with_reason, timeout=60, what="too-big pending with a reason")
    code, out, err = await kfed_logs(bed, f"{NS}/too-big")
    assert code == 1, (out, err)
    assert out == ""
    assert f"Job {NS}/too-big has not been placed on a worker yet" in err
    assert "so it has no logs: pending in its queue" in err, err
    assert f"kfed explain {NS}/" in err

    code, _, err = await kfed_logs(bed, f"{NS}/no-such-job")
    assert code == 1 and "no Workload or job" in err, err


async def test_logs_read_and_followed_from_the_worker_then_gone_then_unreachable(
    article_bed: Bed,
) -> None:
    bed = article_bed
    worker_1 = bed.fed.cluster("worker-1")
    await started(bed)
    # The light job (RTX A1000: worker-1 only), running long enough to read and follow it.
    await bed.manager_api.create(
        R.JOBS, article.seed_job("02-light-job.yaml", delay_ms=600_000), NS
    )
    await wait_for(lambda: placed(bed.manager_api, "light-job"), timeout=60, what="placed")
    worker_api = bed.worker_apis["worker-1"]
    pod = await wait_for(
        lambda: running_pod(worker_api, "light-job"), timeout=60, what="pod running on worker-1"
    )
    assert pod is not None

    # The log as it is now: kwok's lines, each prefixed by the pod (one container).
    code, out, err = await kfed_logs(bed, f"{NS}/light-job")
    assert code == 0, err
    assert out.splitlines() == [f"[{pod}] {line}" for line in KWOK_LINES]
    assert f"Job {NS}/light-job runs on worker-1" in err
    code, out, _ = await kfed_logs(bed, f"{NS}/light-job", "--container", "cuda")
    assert code == 0 and out.splitlines()[0] == f"[{pod}] {KWOK_LINES[0]}"
    code, _, err = await kfed_logs(bed, f"{NS}/light-job", "--container", "sidecar")
    assert code == 2 and "no container 'sidecar'" in err and "cuda" in err, err

    # Followed: what is logged meanwhile arrives, and the command ends once the pod finished.
    try:
        await follow_until_the_pod_finished(bed, worker_api, pod)
    finally:
        worker_1.pod_log_file.write_text(POD_LOG_TEMPLATE.read_text())

    # Finished: kfed collects the job on the worker, its pods (and their logs) go with it.
    await wait_for(lambda: _gone(worker_api), timeout=90, what="light-job's pods collected")
    code, out, err = await kfed_logs(bed, f"{NS}/light-job")
    assert code == 1 and out == "", err
    assert f"Job {NS}/light-job finished on worker-1" in err
    assert "(Succeeded: " in err and "its pods there are gone" in err

    # The worker cannot be reached from here: exit 3, saying so.
    bed.proxies["worker-1"].cut()
    try:
        code, out, err = await kfed_logs(bed, f"{NS}/light-job")
    finally:
        bed.proxies["worker-1"].heal()
    assert code == 3 and out == "", err
    assert "cannot reach worker worker-1" in err


async def _gone(api: KubeApi) -> bool:
    return not await pods_left(api, "light-job")


async def follow_until_the_pod_finished(bed: Bed, worker_api: KubeApi, pod: str) -> None:
    """`kfed logs --follow`: kwok's lines, then a line appended to the worker's log while it
    follows, then the end, by itself, once the pod finished (not before)."""
    log_file = bed.fed.cluster("worker-1").pod_log_file
    proc = await asyncio.create_subprocess_exec(
        *_args(bed, f"{NS}/light-job", "--follow"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stdout = proc.stdout

    async def next_line() -> str:
        line = (
            (await asyncio.wait_for(stdout.readline(), 30 * deadline_scale())).decode().rstrip("\n")
        )
        if "failed to create fsnotify watcher" in line:  # kwok's answer, as a log line
            pytest.fail(
                f"kwok cannot follow a log on this host ({line}): every inotify instance "
                "is taken (fs.inotify.max_user_instances; each kube-apiserver holds six)"
            )
        return line

    try:
        for expected in KWOK_LINES:
            assert await next_line() == f"[{pod}] {expected}"
        with log_file.open("a") as log:
            log.write(cri_line("epoch 1: loss 0.42 (logged while followed)"))
        assert await next_line() == f"[{pod}] epoch 1: loss 0.42 (logged while followed)"
        assert proc.returncode is None, "it follows while the pod runs"
        await finish(worker_api, pod)
        rest, err_bytes = await asyncio.wait_for(proc.communicate(), 60 * deadline_scale())
        code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, err_bytes.decode()
    assert rest == b""
