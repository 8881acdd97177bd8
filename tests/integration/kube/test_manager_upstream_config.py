"""`python -m manager --config FILE` with upstream Kueue v0.19.2's own example configuration
(config/components/manager/controller_manager_config.yaml, as tests/data/upstream-config/
keeps it), a real process against a real kube-apiserver (the lite manager cluster): it
starts, leads and is ready, and its log names, one WARNING line each, by dotted path, every
key of the file kfed does not act on (issue 44, item 6). Before, it stopped at start-up with
a usage error (`--integrations: unknown integration(s) kubeflow.org/mpijob, ...`).

The manager runs in a namespace of its own (its leader Lease), without its webhook (which
is cluster-wide), and only until it is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from pathlib import Path

import aiohttp
import pytest

from e2e.local.federation import LocalFederation
from e2e.local.ports import free_ports
from e2e.waiting import WaitTimeout, wait_for
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

pytestmark = pytest.mark.integration

CONFIG = (
    Path(__file__).resolve().parents[2]
    / "data"
    / "upstream-config"
    / "v0.19.2-controller_manager_config.yaml"
)
IGNORED = [
    "health.healthProbeBindAddress",
    "metrics.bindAddress",
    "webhook.port",
    "leaderElection.resourceName",
    "controller.groupKindConcurrency",
    "integrations.frameworks",
]
"""The keys of that file kfed does not act on (or, for integrations.frameworks, not all of)."""


async def ready(port: int) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/readyz", timeout=aiohttp.ClientTimeout(2)) as r,
        ):
            return r.status == 200
    except aiohttp.ClientError:
        return False


@pytest.mark.timeout(180)
async def test_the_manager_starts_on_upstreams_configuration_and_logs_what_it_ignores(
    kueue_crds: LocalFederation, unique: str, tmp_path: Path
) -> None:
    cluster = kueue_crds.cluster("manager")
    namespace, identity, (port,) = f"upcfg-{unique}", f"upstream-config-{unique}", free_ports(1)
    log = tmp_path / "manager.log"
    with open(log, "wb") as out:  # noqa: ASYNC230 (the child keeps its fd)
        manager = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "manager", "--config", str(CONFIG)),
            *("--kubeconfig", str(cluster.kubeconfig), "--identity", identity),
            *("--namespace", namespace, "--no-webhook", "--log-level", "INFO"),
            *("--metrics-host", "127.0.0.1", "--metrics-port", str(port)),
            *("--leader-lease-duration", "3", "--leader-renew-deadline", "2"),
            *("--leader-retry-period", "0.5"),
            stdout=out,
            stderr=out,
        )

    def output() -> str:
        return log.read_text(errors="replace")

    async def leads_and_is_ready() -> bool:
        assert manager.returncode is None, f"the manager exited:\n{output()}"
        return f"{identity} leads: starting the federation" in output() and await ready(port)

    try:
        try:
            await wait_for(leads_and_is_ready, timeout=90, what="the manager leads and is ready")
        except WaitTimeout as err:
            raise AssertionError(f"{err}; its log:\n{output()}") from None
        lines = output().splitlines()
        for path in IGNORED:
            said = [line for line in lines if f"--config {CONFIG}: {path}: " in line]
            assert len(said) == 1, f"{path} not named once in:\n{output()}"
            assert re.search(r" WARNING manager\b", said[0]), said[0]
        assert "usage:" not in output()
        assert manager.returncode is None
    finally:
        if manager.returncode is None:
            manager.terminate()
            try:
                await asyncio.wait_for(manager.wait(), 30)
            except TimeoutError:
                manager.kill()
                await manager.wait()
        async with await KubeApi.from_kubeconfig_file(cluster.kubeconfig, name="test") as api:
            with contextlib.suppress(errors.NotFound):
                await api.delete(R.NAMESPACES, namespace)
    assert manager.returncode == 0, output()
