"""`python -m manager` (and `python -m worker_shim`) as real processes whose own
kube-apiserver goes away, for real (SIGKILL), then comes back (issue 30, item 6).

Before, the manager exited at start-up when its API server was not up yet, and exited again
("leadership lost; exiting so a fresh process can take over") once it was away for longer
than the renew deadline; run by hand, nothing restarted it. Now it waits, stands by while
the API server is away, and leads again once it is back: the same process holds the Lease
again and admits a Job submitted after the outage.

A cluster of its own (etcd and kube-apiserver only, the CRDs installed), since its API
server is killed: the shared ones stay up for the other tests.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from e2e import binaries
from e2e.local.cluster import LocalCluster
from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.ports import free_ports
from e2e.waiting import WaitTimeout, wait_for
from manager.controllers import workloadstatus as ws
from manager.federation.settings import SHIM_HEARTBEAT_LEASE
from manager.federation.webhooks import webhookconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.builders import queue_set
from tests.integration.controllers import builders as b
from tests.integration.controllers.helpers import workload_of

LEASE = "kfed-manager-leader"
NAMESPACE = "kueue-system"
LEASE_DURATION = 3.0
OUTAGE = 10.0
"""How long the API server stays away: over three leader lease durations."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    try:
        binaries.path_of("kube-apiserver")
    except binaries.BinariesMissing as err:
        pytest.fail(f"{err}. `make test` builds them; run `make binaries` first.")
    fed = LocalFederation(
        "standby", workers=0, root=tmp_path_factory.mktemp("standby"), tie_to_parent=True
    )
    fed.up()
    try:
        install_crds(fed.cluster("manager"))
        yield fed.cluster("manager")
    finally:
        fed.down()


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(cluster.kubeconfig, name="test") as client:
        client.request_timeout = 3
        yield client


@pytest.fixture
async def queue(api: KubeApi, unique: str) -> AsyncIterator[str]:
    """A namespace with a LocalQueue "q" on a ClusterQueue of 4 GPUs; its name."""
    ns, flavor, cq = f"sb-{unique}", f"f-{unique}", f"cq-{unique}"
    await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
    queues = (
        b.flavor(flavor, "h100"),
        b.cluster_queue(cq, flavor, gpus=4),
        b.local_queue(ns, "q", cq),
    )
    async with queue_set(api, *queues):
        yield ns
    await api.delete(R.NAMESPACES, ns)


class Process:
    """A kfed process, its output in a file (shown when an assertion about it fails)."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.proc, self.log = proc, log

    @classmethod
    async def start(cls, log: Path, *args: str) -> Process:
        with open(log, "wb") as out:  # noqa: ASYNC230 (the child keeps its fd)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, *args, stdout=out, stderr=out
            )
        return cls(proc, log)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self) -> str:
        return "\n".join(self.output().splitlines()[-30:])

    def assert_alive(self) -> None:
        assert self.proc.returncode is None, (
            f"the process exited (code {self.proc.returncode}):\n{self.tail()}"
        )

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def start_manager(
    cluster: LocalCluster, log: Path, identity: str, port: int, *extra: str
) -> Process:
    return await Process.start(
        log,
        *("-m", "manager", "--kubeconfig", str(cluster.kubeconfig), "--identity", identity),
        *("--namespace", NAMESPACE, "--leader-lease-duration", str(LEASE_DURATION)),
        *("--leader-renew-deadline", "2", "--leader-retry-period", "0.5"),
        *("--webhook-host", "127.0.0.1", "--webhook-port", "0"),
        *("--register-webhook-host", "127.0.0.1"),
        *("--metrics-host", "127.0.0.1", "--metrics-port", str(port), "--log-level", "INFO"),
        *extra,
    )


async def holder(api: KubeApi) -> str | None:
    """Who holds the manager's Lease: None before any replica has created it (a replica
    serves /readyz before its first election, so a caller may ask that early)."""
    try:
        lease = await api.get(R.LEASES, LEASE, NAMESPACE)
    except errors.NotFound:
        return None
    return str(lease["spec"].get("holderIdentity") or "") or None


async def readiness(port: int) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/readyz", timeout=aiohttp.ClientTimeout(2)) as resp,
    ):
        return resp.status, await resp.text()


def kill_apiserver(cluster: LocalCluster) -> float:
    cluster.stop_role("kube-apiserver", kill=True)
    return time.monotonic()


async def bring_back_apiserver(cluster: LocalCluster) -> None:
    cluster.restart_role("kube-apiserver")  # main thread: tied to this process (process.py)
    await wait_for(
        lambda: asyncio.to_thread(cluster.is_ready), timeout=90, what="the API server back"
    )


async def stays_up_through_the_outage(process: Process, killed: float, what: str) -> None:
    """The outage lasts ``OUTAGE`` seconds from the kill; the process must live through it."""

    def over() -> bool:
        process.assert_alive()
        return time.monotonic() - killed >= OUTAGE and what in process.output()

    await wait_for(over, timeout=OUTAGE + 30, interval=0.2, what=f"{OUTAGE:.0f}s out: {what}")


async def admits_a_job(api: KubeApi, process: Process, ns: str, name: str) -> None:
    await api.create(R.JOBS, b.job(ns, name, "q", model="h100"), ns)

    async def admitted() -> bool:
        process.assert_alive()
        wl = await workload_of(api, ns, name)
        return wl is not None and ws.is_admitted(wl)

    try:
        await wait_for(admitted, timeout=60, what=f"job {name} admitted")
    except WaitTimeout as err:
        raise AssertionError(f"{err}; its log ends:\n{process.tail()}") from None


@pytest.mark.timeout(240)
async def test_manager_leads_again_after_its_api_server_outage(
    cluster: LocalCluster, api: KubeApi, queue: str, tmp_path: Path
) -> None:
    identity, (port,) = "standby-m1", free_ports(1)
    manager = await start_manager(cluster, tmp_path / "manager.log", identity, port)
    try:

        async def leading() -> bool:
            manager.assert_alive()
            status, why = await readiness(port)
            return await holder(api) == identity and status == 200 and "leading" in why

        await wait_for(leading, timeout=60, what="it leads", ignore=(aiohttp.ClientError,))
        await admits_a_job(api, manager, queue, "before")

        killed = kill_apiserver(cluster)
        try:

            async def standing_by() -> bool:
                manager.assert_alive()
                status, why = await readiness(port)
                return status == 503 and "standby: leadership lost" in why

            await wait_for(
                standing_by, timeout=30, what="/readyz: standing by", ignore=(aiohttp.ClientError,)
            )
            await stays_up_through_the_outage(manager, killed, "leadership lost")
            assert "standing by" in manager.output()
        finally:
            await bring_back_apiserver(cluster)

        await wait_for(
            leading,
            timeout=60,
            what="it leads again",
            ignore=(errors.KubeError, aiohttp.ClientError),
        )
        assert "leading again" in manager.output(), manager.tail()
        await admits_a_job(api, manager, queue, "after")
        manager.assert_alive()
    finally:
        await manager.stop()
        await webhookconfig.delete_webhook_configuration(api, "kfed-manager")


@pytest.mark.timeout(240)
async def test_manager_started_before_its_api_server_waits_and_leads(
    cluster: LocalCluster, api: KubeApi, queue: str, tmp_path: Path
) -> None:
    identity, (port,) = "standby-m2", free_ports(1)
    killed = kill_apiserver(cluster)
    # Its log in JSON (--log-format json), parsed line by line below: issue "Speak the
    # platform's language", item 4.
    manager = await start_manager(
        cluster, tmp_path / "manager.log", identity, port, "--log-format", "json"
    )
    try:
        try:
            await stays_up_through_the_outage(manager, killed, "trying again")
            status, why = await readiness(port)
            assert status == 503 and "has not read its Lease yet" in why, why
        finally:
            await bring_back_apiserver(cluster)

        async def leading() -> bool:
            manager.assert_alive()
            status, why = await readiness(port)
            return await holder(api) == identity and status == 200 and "leading" in why

        await wait_for(leading, timeout=60, what="it leads", ignore=(errors.KubeError,))
        await admits_a_job(api, manager, queue, "late")
        logged = [json.loads(line) for line in manager.output().splitlines() if line.strip()]
        assert all({"level", "ts", "logger", "msg"} <= line.keys() for line in logged)
        assert any(
            line["level"] == "warning" and "trying again" in line["msg"] for line in logged
        ), logged[:5]
        assert any("became leader" in line["msg"] for line in logged), logged[-5:]
    finally:
        await manager.stop()
        await webhookconfig.delete_webhook_configuration(api, "kfed-manager")


@pytest.mark.timeout(240)
async def test_worker_shim_started_before_its_api_server_fences_and_rides_out_an_outage(
    cluster: LocalCluster, api: KubeApi, queue: str, unique: str, tmp_path: Path
) -> None:
    """The shim never exited on its API server's outages (its informers and heartbeat
    retry), but started before its API server it never wrote its heartbeat: the namespace
    it lives in was created once, at start-up, its failure ignored. Now created once it can
    be. A job submitted right after a mid-run outage is admitted too: its Workload, created
    while the Workload watch was still down, used to be skipped by the re-list (same
    resourceVersion as the copy the job controller had remembered) and never admitted."""
    fencing_ns, (port,) = f"sb-fence-{unique}", free_ports(1)
    killed = kill_apiserver(cluster)
    shim = await Process.start(
        tmp_path / "shim.log",
        *("-m", "worker_shim", "--kubeconfig", str(cluster.kubeconfig)),
        *("--namespace", fencing_ns, "--metrics-host", "127.0.0.1", "--metrics-port", str(port)),
    )

    async def heartbeat_since(since: float) -> bool:
        shim.assert_alive()
        lease = await api.get(R.LEASES, SHIM_HEARTBEAT_LEASE, fencing_ns)
        return _epoch(lease["spec"]["renewTime"]) > since

    try:
        try:
            await stays_up_through_the_outage(shim, killed, "listing again")
        finally:
            await bring_back_apiserver(cluster)
        back = time.time()
        await wait_for(
            lambda: heartbeat_since(back),
            timeout=30,
            what="its heartbeat written",
            ignore=(errors.NotFound,),
        )
        await admits_a_job(api, shim, queue, "first")

        killed = kill_apiserver(cluster)
        try:
            await stays_up_through_the_outage(shim, killed, "heartbeat lease not renewed")
        finally:
            await bring_back_apiserver(cluster)
        back = time.time()
        await admits_a_job(api, shim, queue, "right-after")
        await wait_for(lambda: heartbeat_since(back), timeout=30, what="its heartbeat again")
    finally:
        await shim.stop()
        await api.delete(R.NAMESPACES, fencing_ns)


def _epoch(micro_time: str) -> float:
    when = dt.datetime.strptime(micro_time.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return when.timestamp()
