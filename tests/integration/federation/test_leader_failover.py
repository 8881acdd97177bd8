"""Scenario E: two `python -m manager` replicas; the leader is killed with SIGKILL in the
middle of 200 jobs; the standby takes over and every job completes exactly once. And the
manager's own control plane restarting under running jobs (issue "Never twice, never
stuck", finding 3): they keep running and are followed again, not restarted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.federation.webhooks import webhookconfig
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event, Informer
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.runs import complete_jobs
from tests.integration.federation.test_dispatch import h100_job
from worker_shim.fencing import FENCED_ANNOTATION

pytestmark = pytest.mark.full
NS = article.NS
JOBS = int(os.environ.get("KFED_E_JOBS", "200"))
LOG_DIR = Path(os.environ.get("KFED_E_LOGS", "/tmp"))


@pytest.fixture
async def article_bed(bed: Bed) -> AsyncIterator[Bed]:
    await article.set_up(bed.fed, bed.manager_api, bed.worker_apis, only=("worker-2", "worker-3"))
    # The global h100 quota as large as both workers together.
    cq = await bed.manager_api.get(R.CLUSTER_QUEUES, "gpu-cq")
    groups = cq["spec"]["resourceGroups"]
    for flavor in groups[0]["flavors"]:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                resource["nominalQuota"] = 8
    await bed.manager_api.patch(R.CLUSTER_QUEUES, "gpu-cq", {"spec": {"resourceGroups": groups}})
    yield bed
    await bed.stop_all()
    await article.tear_down(bed.manager_api, bed.worker_apis)


async def start_manager(
    kubeconfig: Path, identity: str, *, webhook: bool, extra: tuple[str, ...] = ()
) -> asyncio.subprocess.Process:
    args = [
        sys.executable,
        "-m",
        "manager",
        "--kubeconfig",
        str(kubeconfig),
        "--identity",
        identity,
        "--leader-lease-duration",
        "4",
        "--leader-renew-deadline",
        "3",
        "--leader-retry-period",
        "0.5",
        "--worker-lease-duration",
        "20",
        "--worker-lease-renew-period",
        "1",
        "--worker-request-timeout",
        "2",
        "--admission-timeout",
        "10",
        "--gc-interval",
        "5",
        "--log-level",
        "INFO",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
    ]
    if webhook:
        args += [
            "--webhook-host",
            "127.0.0.1",
            "--webhook-port",
            "0",
            "--register-webhook-host",
            "127.0.0.1",
        ]
    else:
        args += ["--no-webhook"]
    args += extra  # later flags win
    with open(LOG_DIR / f"kfed-e-{identity}.log", "wb") as log:  # noqa: ASYNC230 (child keeps its fd)
        return await asyncio.create_subprocess_exec(*args, stdout=log, stderr=log)


async def leader(api: KubeApi) -> str | None:
    with contextlib.suppress(Exception):
        lease = await api.get(R.LEASES, "kfed-manager-leader", "kueue-system")
        return str(lease["spec"].get("holderIdentity") or "") or None
    return None


@pytest.mark.timeout(900)
async def test_e_kill_the_leader_during_200_jobs_every_job_completes_once(article_bed: Bed) -> None:
    bed = article_bed
    for worker in ("worker-2", "worker-3"):
        await bed.start_shim(worker)
    # Succeeded pods per job, across workers, seen by watching the workers directly; and
    # each pod's story, which a failure prints (which worker, which Job made it, when).
    succeeded: dict[str, set[str]] = defaultdict(set)
    clusters_of: dict[str, set[str]] = defaultdict(set)
    stories: dict[str, dict[str, PodStory]] = defaultdict(dict)
    began = time.monotonic()
    pod_informers = []
    for worker, wapi in bed.worker_apis.items():
        informer = Informer(wapi, R.PODS, namespace=NS)

        def on_pod(event: Event, worker: str = worker) -> None:
            job = (event.obj["metadata"].get("labels") or {}).get("job-name")
            if not job:
                return
            phase = (event.obj.get("status") or {}).get("phase")
            uid = event.obj["metadata"]["uid"]
            story = stories[job].setdefault(uid, PodStory(worker, owner_uid(event.obj)))
            story.saw(f"{event.type}:{phase}", time.monotonic() - began)
            if phase in ("Running", "Succeeded"):
                clusters_of[job].add(worker)
            if phase == "Succeeded":
                succeeded[job].add(uid)

        informer.subscribe(on_pod)
        pod_informers.append(asyncio.create_task(informer.run()))

    kubeconfig = bed.fed.kubeconfig("manager")
    api = bed.manager_api
    procs = {"m1": await start_manager(kubeconfig, "m1", webhook=True)}
    try:
        await wait_for(lambda: _is(leader(api), "m1"), timeout=90, what="m1 leads")
        procs["m2"] = await start_manager(kubeconfig, "m2", webhook=False)
        names = [f"j{i:03d}" for i in range(JOBS)]

        async def submit(name: str) -> None:
            await api.create(R.JOBS, h100_job(name, delay_ms=300), NS)

        for start in range(0, JOBS, 20):
            await asyncio.gather(*(submit(n) for n in names[start : start + 20]))

        async def done_count() -> int:
            jobs = (await api.list(R.JOBS, NS))["items"]
            return sum(
                1
                for j in jobs
                if any(
                    c["type"] == "Complete" and c["status"] == "True"
                    for c in (j.get("status") or {}).get("conditions") or []
                )
            )

        await wait_for(
            lambda: _at_least(done_count(), JOBS // 4),
            timeout=240,
            interval=1.0,
            what="a quarter of the jobs done",
        )
        procs["m1"].kill()  # SIGKILL: no release, no cleanup
        await procs["m1"].wait()
        killed = time.monotonic() - began
        await wait_for(lambda: _is(leader(api), "m2"), timeout=90, what="m2 takes over")
        took_over = time.monotonic() - began
        await wait_for(
            lambda: _at_least(done_count(), JOBS),
            timeout=600,
            interval=1.0,
            what="all jobs complete",
        )
        twice = {n: len(succeeded[n]) for n in names if len(succeeded[n]) != 1}
        assert not twice, (
            f"{twice}; m1 killed at {killed:.1f}s, m2 led at {took_over:.1f}s; their pods: "
            + "; ".join(f"{n}: {stories[n]}" for n in twice)
        )
        assert all(len(clusters_of[n]) == 1 for n in names), "a job ran on two workers"
    finally:
        for proc in procs.values():
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        for task in pod_informers:
            task.cancel()
        await webhookconfig.delete_webhook_configuration(api, "kfed-manager")


@dataclass
class PodStory:
    """One pod of a job as the test saw it: where, made by which Job, and its events
    (type:phase at seconds since the test began)."""

    worker: str
    job_uid: str
    events: list[str] = field(default_factory=list)

    def saw(self, what: str, at: float) -> None:
        if not self.events or not self.events[-1].startswith(what + "@"):
            self.events.append(f"{what}@{at:.1f}")


def owner_uid(pod: dict[str, Any]) -> str:
    return next((o["uid"] for o in pod["metadata"].get("ownerReferences") or []), "")


async def _is(value: object, expected: str) -> bool:
    return bool(await value == expected)  # type: ignore[misc]


async def _at_least(value: object, minimum: int) -> bool:
    return bool(await value >= minimum)  # type: ignore[misc]


@pytest.mark.timeout(600)
async def test_a_manager_control_plane_restart_leaves_running_jobs_running(
    article_bed: Bed,
) -> None:
    """Finding 3. The manager's kube-apiserver is killed: the leader loses its lease and
    stands by (issue 30, item 6: it used to exit), and while it does no manager renews the
    workers' fencing Leases. Before, every worker fenced every job once the lease expired,
    and the jobs started again from the beginning. Under the default at-most-once policy a
    copy is fenced only after the outage timeout, so the jobs keep running; when the control
    plane is back, the same process leads again and follows them to completion: the same
    pods, never fenced, never restarted."""
    bed = article_bed
    for worker in ("worker-2", "worker-3"):
        await bed.start_shim(worker)
    pods: dict[str, set[str]] = defaultdict(set)
    fenced: list[str] = []
    watchers = []
    for wapi in bed.worker_apis.values():
        informer = Informer(wapi, R.PODS, namespace=NS)

        def on_pod(event: Event) -> None:
            job = (event.obj["metadata"].get("labels") or {}).get("job-name")
            if job:
                pods[job].add(event.obj["metadata"]["uid"])

        informer.subscribe(on_pod)
        watchers.append(asyncio.create_task(informer.run()))
    for shim in bed.shims.values():

        def on_copy(event: Event) -> None:
            if FENCED_ANNOTATION in (event.obj["metadata"].get("annotations") or {}):
                fenced.append(event.key)

        shim.state.workloads.subscribe(on_copy)

    kubeconfig = bed.fed.kubeconfig("manager")
    api = bed.manager_api
    # A short worker lease: under the fast policy the workers would fence after 3 s.
    fast_lease = ("--worker-lease-duration", "3", "--worker-lost-timeout", "300")
    procs = {"m1": await start_manager(kubeconfig, "m1", webhook=True, extra=fast_lease)}
    manager_cluster = bed.fed.cluster("manager")
    names = [f"r{i}" for i in range(4)]
    try:
        await wait_for(lambda: _is(leader(api), "m1"), timeout=90, what="m1 leads")
        for name in names:
            await api.create(R.JOBS, h100_job(name, delay_ms=40_000), NS)

        async def all_running() -> bool:
            return all(len(pods[n]) == 1 for n in names)

        await wait_for(all_running, timeout=120, what="every job running on a worker")
        before = {n: set(pods[n]) for n in names}
        manager_cluster.stop_role("kube-apiserver", kill=True)
        try:
            m1_log = LOG_DIR / "kfed-e-m1.log"

            def standing_by() -> bool:
                assert procs["m1"].returncode is None, "the leader exited"
                return "leadership lost" in m1_log.read_text(errors="replace")

            await wait_for(standing_by, timeout=60, what="the leader stands by, lease lost")
            lease_name = "kfed-manager-multikueue"
            worker_api = bed.worker_apis["worker-2"]

            async def well_past_the_worker_lease() -> bool:
                # Standing by, m1 renews no worker lease: it no longer leads.
                assert not fenced, f"fenced during a short manager outage: {fenced}"
                assert procs["m1"].returncode is None, "the leader exited"
                lease = await worker_api.get(R.LEASES, lease_name, "kueue-system")
                renewed = lease["spec"].get("renewTime")
                return renewed is not None and _seconds_since(renewed) > 3 + 7

            await wait_for(
                well_past_the_worker_lease,
                timeout=60,
                interval=0.5,
                what="the workers' lease expired long enough for fast fencing",
            )
        finally:
            manager_cluster.restart_role("kube-apiserver")  # main thread: see process.py
            await wait_for(
                lambda: asyncio.to_thread(manager_cluster.is_ready),
                timeout=90,
                what="the manager's API server back",
            )
        # The same process leads again, and follows.
        await wait_for(lambda: _is(leader(api), "m1"), timeout=90, what="m1 leads again")

        async def all_complete() -> bool:
            return set(names) <= await complete_jobs(api, NS)

        await wait_for(all_complete, timeout=180, interval=1.0, what="every job Complete")
        assert not fenced, f"fenced: {fenced}"
        assert {n: pods[n] for n in names} == before, "a job was restarted"
    finally:
        for proc in procs.values():
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        for task in watchers:
            task.cancel()
        await webhookconfig.delete_webhook_configuration(api, "kfed-manager")


def _seconds_since(micro_time: str) -> float:
    import datetime as dt

    when = dt.datetime.strptime(micro_time.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return (dt.datetime.now(dt.UTC) - when).total_seconds()
