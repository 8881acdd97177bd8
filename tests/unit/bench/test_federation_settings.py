"""How the federation benchmark starts and judges kfed's processes: the manager's command
line, its failover flags for the drills, and when the manager counts as ready."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.bench.federation import drills, processes
from manager import main as manager_main
from manager.federation.settings import DispatchMode


def test_the_manager_command_line_is_one_the_manager_accepts() -> None:
    settings = drills.failover_settings(fast=True)
    argv = processes.manager_args(
        Path("/tmp/kubeconfig"), "all-at-once", drills.failover_flags(settings, fast=True)
    )
    args = manager_main.parse_args(argv)
    assert args.metrics_port == 0 and args.no_webhook
    parsed = manager_main.settings_from(args)
    assert parsed.dispatch_mode is DispatchMode.ALL_AT_ONCE
    assert parsed.lease_duration == 3.0
    assert parsed.lease_renew_period == 0.5
    assert parsed.request_timeout == 1.0
    assert parsed.fence_grace == 1.5


def test_fast_failover_gives_the_tests_window_and_default_failover_passes_no_flag() -> None:
    fast = drills.failover_settings(fast=True)
    assert fast["window_seconds"] == 5.5
    default = drills.failover_settings(fast=False)
    assert default["window_seconds"] == 19.0
    assert drills.failover_flags(default, fast=False) == []


def test_the_port_comes_from_the_line_the_manager_logs() -> None:
    line = (
        "2026-01-01 00:00:00,000 INFO manager.observability.server: health, metrics and "
        "dashboard on http://127.0.0.1:40123 (/healthz, /readyz, /metrics, /dashboard)"
    )
    match = processes.LISTENING.search(line)
    assert match is not None and match.group(1) == "40123"


def test_a_fencing_shim_is_seen_in_its_metrics() -> None:
    text = (
        "# TYPE kfed_shim_fenced gauge\n"
        'kfed_shim_fenced{origin="multikueue"} 1.0\n'
        'kfed_shim_fenced{origin="other"} 0.0\n'
    )
    assert processes.fenced_origins(text) == {"multikueue"}
    assert processes.fenced_origins("# TYPE kfed_shim_fenced gauge\n") == set()


def state(*clusters: dict[str, Any], ready: bool = True, leader: bool = True) -> dict[str, Any]:
    return {"ready": ready, "is_leader": leader, "clusters": list(clusters)}


def cluster(name: str, *, active: bool = True, can_fence: bool = True) -> dict[str, Any]:
    return {"name": name, "active": active, "can_fence": can_fence}


def test_the_manager_is_ready_when_it_leads_and_reaches_every_worker() -> None:
    workers = ["worker-1", "worker-2"]
    both = (cluster("worker-1"), cluster("worker-2"))
    assert processes.federation_ready(state(*both), workers, fencing=True)
    assert not processes.federation_ready(state(*both, ready=False), workers, fencing=False)
    assert not processes.federation_ready(state(*both, leader=False), workers, fencing=False)
    assert not processes.federation_ready(state(both[0]), workers, fencing=False)
    lost = (cluster("worker-1"), cluster("worker-2", active=False))
    assert not processes.federation_ready(state(*lost), workers, fencing=False)


def test_drills_also_need_every_worker_able_to_fence() -> None:
    workers = ["worker-1"]
    unfenced = state(cluster("worker-1", can_fence=False))
    assert processes.federation_ready(unfenced, workers, fencing=False)
    assert not processes.federation_ready(unfenced, workers, fencing=True)
