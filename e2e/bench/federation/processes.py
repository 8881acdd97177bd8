"""kfed's real processes for the benchmark: ``python -m manager`` and one ``python -m
worker_shim`` per worker, started as subprocesses (their CPU time is then theirs alone, read
from /proc), each logging to its own file; and the HTTP the benchmark reads from the manager
(its readiness and the dashboard's view of the workers, and ``/metrics``).

Processes are started from the main thread with ``tie_to_parent``: the kernel kills them if
the benchmark dies, whatever way it dies.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from e2e.local.process import ManagedProcess
from e2e.waiting import wait_for

LISTENING = re.compile(r"health, metrics and dashboard on http://[^\s:]+:(\d+)")
"""The line the observability server logs once it listens (its port is 0: any free one)."""
LEADER_LEASE = "kfed-manager-leader"
"""The manager's leader-election Lease (manager/main.py), in its --namespace."""
SHIM_FENCED = "kfed_shim_fenced"


def kfed_process(role: str, module: str, args: Sequence[str], log: Path) -> ManagedProcess:
    proc = ManagedProcess(
        role=role,
        argv=[sys.executable, "-m", module, *args],
        log_path=log,
        tie_to_parent=True,
        env={"PYTHONUNBUFFERED": "1"},
    )
    proc.start()
    return proc


def start_shim(
    worker: str, kubeconfig: Path, logs: Path, extra: Sequence[str] = ()
) -> ManagedProcess:
    return kfed_process(
        f"shim-{worker}",
        "worker_shim",
        [
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            "0",
            *extra,
        ],
        logs / f"shim-{worker}.log",
    )


def manager_args(kubeconfig: Path, mode: str, extra: Sequence[str] = ()) -> list[str]:
    """The manager as the benchmark runs it: defaults, except the dispatch mode, any free
    metrics port, no Job webhook (the benchmark's Jobs already carry ``managedBy``), and the
    fast failover policy, whose times the drills measure (at-most-once, the default, moves a
    partitioned worker's jobs only once it is back or after the outage timeout)."""
    return [
        "--kubeconfig",
        str(kubeconfig),
        "--dispatch-mode",
        mode,
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--no-webhook",
        "--failover-policy",
        "fast",
        *extra,
    ]


def start_manager(label: str, args: Sequence[str], logs: Path) -> ManagedProcess:
    """One log file per start (``manager-<label>.log``), so a restart never reads the port
    its predecessor logged."""
    return kfed_process("manager", "manager", args, logs / f"manager-{label}.log")


async def listening_port(proc: ManagedProcess, *, timeout: float = 60) -> int:
    def port() -> int | None:
        if not proc.alive:
            raise RuntimeError(f"{proc.role} exited:\n{proc.log_tail(30)}")
        try:
            text = proc.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return None
        match = LISTENING.search(text)
        return int(match.group(1)) if match else None

    found = await wait_for(
        port, timeout=timeout, what=f"{proc.role} listening for /metrics", interval=0.1
    )
    assert found is not None  # wait_for returns the first truthy value
    return found


async def get_text(url: str, *, timeout: float = 10) -> str:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.get(url) as response,
    ):
        response.raise_for_status()
        return await response.text()


async def get_json(url: str, *, timeout: float = 10) -> Any:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.get(url) as response,
    ):
        response.raise_for_status()
        return await response.json()


def fenced_origins(metrics_text: str) -> set[str]:
    """Origins a worker shim is fencing right now, from its /metrics."""
    return {
        sample.labels.get("origin", "")
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == SHIM_FENCED and sample.value
    }


def federation_ready(state: dict[str, Any], workers: Sequence[str], *, fencing: bool) -> bool:
    """The manager leads, its informers synced, every worker is connected and (for the
    drills) known to run a shim that fences itself, so a partition fails over fast."""
    if not state.get("ready") or not state.get("is_leader"):
        return False
    clusters = {c["name"]: c for c in state.get("clusters") or []}
    for worker in workers:
        row = clusters.get(worker)
        if row is None or not row.get("active"):
            return False
        if fencing and not row.get("can_fence"):
            return False
    return True


async def wait_manager_ready(
    proc: ManagedProcess, port: int, workers: Sequence[str], *, fencing: bool, timeout: float = 120
) -> None:
    url = f"http://127.0.0.1:{port}/dashboard/state.json"

    async def ready() -> bool:
        if not proc.alive:
            raise RuntimeError(f"the manager exited:\n{proc.log_tail(30)}")
        state = await get_json(url)
        return federation_ready(state, workers, fencing=fencing)

    await wait_for(
        ready,
        timeout=timeout,
        what="the manager leading with every worker connected",
        interval=0.25,
        ignore=(aiohttp.ClientError, TimeoutError),
    )
