"""`python -m worker_shim` as a real process: it admits the article's light job on its
cluster and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers import builders as b
from tests.integration.controllers.helpers import workload_of

pytestmark = pytest.mark.full


async def test_worker_shim_process_admits_and_stops_on_sigterm(
    single_cluster: LocalCluster, api: KubeApi, unique: str
) -> None:
    ns, flavor, cq = f"shim-{unique}", f"h100-{unique}", f"shim-{unique}"
    await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
    await api.create(R.RESOURCE_FLAVORS, b.flavor(flavor, "h100"))
    await api.create(R.CLUSTER_QUEUES, b.cluster_queue(cq, flavor, gpus=1))
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", cq), ns)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "worker_shim",
        "--kubeconfig",
        str(single_cluster.kubeconfig),
        "--no-fencing",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--log-level",
        "WARNING",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await api.create(R.JOBS, b.job(ns, "one", "q", delay_ms=500, model="h100"), ns)

        async def admitted() -> bool:
            wl = await workload_of(api, ns, "one")
            return wl is not None and ws.is_admitted(wl)

        await wait_for(admitted, timeout=60, what="the shim process admits the job")
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 20)
        output = (await proc.stdout.read()).decode() if proc.stdout else ""
        assert code == 0, output
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await api.delete(R.NAMESPACES, ns)
        await api.delete(R.CLUSTER_QUEUES, cq)
        await api.delete(R.RESOURCE_FLAVORS, flavor)
