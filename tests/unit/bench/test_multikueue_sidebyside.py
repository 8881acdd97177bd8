"""The side-by-side report of ``make bench-multikueue BENCH_ARGS="--against-upstream"``:
processes compared by what they do whoever runs them, per-workload figures, and the ratios
kfed / upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from e2e.bench.multikueue import sidebyside, upstream
from e2e.bench.multikueue.__main__ import main, parse_args
from e2e.bench.multikueue.recorder import Durations
from e2e.bench.multikueue.run import ModeResult, ProcessFigures
from e2e.local.cluster import LocalCluster


def run(
    mode: str,
    *,
    throughput: float,
    admission_s: list[float],
    requests: dict[str, dict[str, int]],
    processes: dict[str, tuple[float, float]],
    workloads: int = 10,
    admitted: int | None = None,
) -> ModeResult:
    return ModeResult(
        mode=mode,
        workloads=workloads,
        creators=1,
        admitted=workloads if admitted is None else admitted,
        throughput=throughput,
        quota_reservation=Durations.of([s / 10 for s in admission_s]),
        admission=Durations.of(admission_s),
        requests=requests,
        processes={n: ProcessFigures(cpu, rss) for n, (cpu, rss) in processes.items()},
        load_average_before=(0.8, 0.5, 0.4),
        settle_seconds=20.0,
    )


KFED = run(
    "all-at-once",
    throughput=20.0,
    admission_s=[1.0, 2.0],
    requests={
        "worker-1": {"POST workloads": 10, "GET workloads": 10},
        "manager": {"PATCH workloads/status": 30, "GET leases": 10},
    },
    processes={
        "kfed manager": (0.2, 150.0),
        "kfed shim worker-1": (0.05, 120.0),
        "kube-apiserver manager": (0.4, 300.0),
        "etcd manager": (0.02, 50.0),
        "benchmark (this process)": (9.0, 140.0),
    },
)
UPSTREAM = run(
    upstream.MODE,
    throughput=2.0,
    admission_s=[4.0, 8.0],
    requests={
        "manager": {"APPLY workloads/status": 40, "GET workloads": 20},
        "worker-1": {"POST workloads": 10, "GET workloads": 30},
    },
    processes={
        "upstream kueue manager": (0.4, 90.0),
        "upstream kueue worker-1": (0.1, 80.0),
        "kube-apiserver manager": (0.8, 450.0),
        "etcd manager": (0.0, 60.0),
        "benchmark (this process)": (1.0, 140.0),
    },
)


def test_processes_are_compared_by_what_they_do() -> None:
    assert sidebyside.process_key("kfed manager") == ("controller", "manager")
    assert sidebyside.process_key("kfed shim worker-3") == ("controller", "worker-3")
    assert sidebyside.process_key("upstream kueue manager") == ("controller", "manager")
    assert sidebyside.process_key("upstream kueue worker-12") == ("controller", "worker-12")
    assert sidebyside.process_key("kube-apiserver worker-2") == ("kube-apiserver", "worker-2")
    assert sidebyside.process_key("etcd manager") == ("etcd", "manager")
    assert sidebyside.process_key("benchmark (this process)") is None


def test_figures_are_per_workload_with_writes_apart_and_sums_per_role() -> None:
    found = sidebyside.figures(KFED)
    assert found["workloads/s"] == 20.0
    assert found["admission P50 (ms)"] == pytest.approx(1000)
    assert found["admission P95 (ms)"] == pytest.approx(2000)
    assert found["API requests / workload, manager"] == pytest.approx(4.0)
    assert found["writes / workload, manager"] == pytest.approx(3.0)
    assert found["writes / workload, worker-1"] == pytest.approx(1.0)
    assert found["API requests / workload, all clusters"] == pytest.approx(6.0)
    assert found["CPU ms / workload, controller manager"] == pytest.approx(20.0)
    assert found["CPU ms / workload, controller worker-1"] == pytest.approx(5.0)
    assert found["CPU ms / workload, controllers"] == pytest.approx(25.0)
    assert found["CPU ms / workload, kube-apiservers"] == pytest.approx(40.0)
    assert found["CPU ms / workload, all of them"] == pytest.approx(67.0)
    assert found["peak RSS MiB, manager controller"] == 150.0
    # The benchmark's own process is no one's controller: left out.
    assert not [f for f in found if "benchmark" in f]
    # The manager before its workers, whatever order the counters came in.
    clusters = [f.rsplit(", ", 1)[1] for f in found if f.startswith("API requests / workload")]
    assert clusters == ["manager", "worker-1", "all clusters"]


def test_workers_are_ordered_by_number() -> None:
    many = run(
        "capacity-aware",
        throughput=1.0,
        admission_s=[1.0],
        requests={w: {"GET workloads": 1} for w in ("worker-10", "worker-2", "manager")},
        processes={},
    )
    found = [f for f in sidebyside.figures(many) if f.startswith("writes / workload, ")]
    assert found == [
        "writes / workload, manager",
        "writes / workload, worker-2",
        "writes / workload, worker-10",
        "writes / workload, all clusters",
    ]


def test_ratios_are_kfed_over_upstream_for_every_kfed_run() -> None:
    capacity = run(
        "capacity-aware",
        throughput=30.0,
        admission_s=[0.5],
        requests={"manager": {"POST jobs": 10}},
        processes={"kfed manager": (0.1, 100.0)},
    )
    comparison = sidebyside.compare([capacity, KFED], UPSTREAM)
    assert comparison.runs == ["capacity-aware", "all-at-once", upstream.MODE]
    throughput = comparison.row("workloads/s")
    assert throughput is not None
    assert throughput.values == {"capacity-aware": 30.0, "all-at-once": 20.0, upstream.MODE: 2.0}
    assert throughput.ratios == {"capacity-aware": 15.0, "all-at-once": 10.0}
    cpu = comparison.row("CPU ms / workload, controller manager")
    assert cpu is not None and cpu.ratios["all-at-once"] == pytest.approx(0.5)
    # Upstream's etcd spent nothing measurable: no ratio, rather than a division by zero.
    etcd = comparison.row("CPU ms / workload, etcd manager")
    assert etcd is not None and etcd.ratios["all-at-once"] is None
    # A figure only one run has is still shown, with no ratio where it is missing.
    shim = comparison.row("CPU ms / workload, controller worker-1")
    assert shim is not None and shim.values["capacity-aware"] is None
    assert shim.ratios["capacity-aware"] is None
    assert comparison.settle_seconds[upstream.MODE] == 20.0
    assert comparison.load_before["all-at-once"] == 0.8


def test_the_report_prints_each_run_and_the_ratios_and_marks_an_incomplete_run() -> None:
    stalled = run(
        upstream.MODE,
        throughput=1.0,
        admission_s=[9.0],
        requests={},
        processes={},
        admitted=3,
    )
    stalled.error = "3/10 admitted by the deadline"
    text = sidebyside.render(sidebyside.compare([KFED], stalled))
    assert "all-at-once / up" in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("workloads/s")]
    assert line.split()[1:] == ["20.0", "1.0", "20.00"]
    assert f"{upstream.MODE}: INCOMPLETE" in text
    assert "all-at-once: complete; waited 20 s" in text


def test_the_markdown_table_has_a_row_per_figure_and_the_ratios_in_bold() -> None:
    comparison = sidebyside.compare([KFED], UPSTREAM)
    lines = sidebyside.markdown(comparison).splitlines()
    assert lines[0] == f"| figure | all-at-once | {upstream.MODE} | all-at-once / upstream |"
    assert lines[1] == "|---|---:|---:|---:|"
    assert "| workloads/s | 20.0 | 2.0 | **10.00** |" in lines
    assert "| admission P95 (ms) | 2,000.0 | 8,000.0 | **0.25** |" in lines
    assert len(lines) == 2 + len(comparison.rows)


def test_the_json_keeps_every_row_rounded() -> None:
    data: dict[str, Any] = sidebyside.compare([KFED], UPSTREAM).to_json()
    assert data["baseline"] == upstream.MODE
    rows = {r["figure"]: r for r in data["rows"]}
    assert rows["workloads/s"]["ratios"] == {"all-at-once": 10.0}
    assert rows["admission P95 (ms)"]["values"] == {"all-at-once": 2000.0, upstream.MODE: 8000.0}
    assert data["complete"] == {"all-at-once": True, upstream.MODE: True}


def test_a_saved_comparison_is_drawn_again_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    comparison = sidebyside.compare([KFED], UPSTREAM)
    again = sidebyside.Comparison.from_json(json.loads(json.dumps(comparison.to_json())))
    assert sidebyside.render(again) == sidebyside.render(comparison)
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps({"modes": [], "side_by_side": comparison.to_json()}))
    assert main(["--from-json", str(saved)]) == 0
    assert sidebyside.markdown(comparison) in capsys.readouterr().out
    saved.write_text(json.dumps({"modes": []}))
    assert main(["--from-json", str(saved)]) == 2


def test_the_plot_draws_the_headline_ratios(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "ratios.png"
    sidebyside.plot(sidebyside.compare([KFED], UPSTREAM), out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_against_upstream_adds_upstreams_run_and_waits_for_quiet() -> None:
    args = parse_args(["--against-upstream", "--mode", "allatonce"])
    assert args.modes == ["all-at-once", upstream.MODE]
    assert args.quiet.patience == 180.0
    assert parse_args(["--against-upstream", "--settle-patience", "0"]).quiet.patience == 0.0
    assert parse_args([]).quiet.patience == 0.0
    # Upstream's clients to the workers allow ~1.3/s: its run may take longer than kfed's.
    assert (args.timeout, args.upstream_timeout) == (600.0, 2000.0)
    assert parse_args(["--against-upstream", "--jobs", "50"]).upstream_timeout == 600.0
    assert parse_args(["--against-upstream", "--timeout", "90"]).upstream_timeout == 90.0


def test_a_plot_without_upstream_is_refused() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--plot", "x.png"])


SHIPPED = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
leaderElection:
  leaderElect: true
controller:
  groupKindConcurrency:
    Job.batch: 5
    Workload.kueue.x-k8s.io: 5
clientConnection:
  qps: 50
  burst: 100
"""


def test_upstream_runs_with_the_settings_its_manifests_deploy(tmp_path: Path) -> None:
    deployed = upstream.deployed_settings(SHIPPED)
    assert set(deployed) == {"controller", "clientConnection"}
    cluster = cast(LocalCluster, type("Cluster", (), {"directory": tmp_path})())
    ports = {"health": 1, "metrics": 2, "webhook": 3}
    config = upstream.TunedKueue(cluster, deployed=deployed).configuration(**ports)
    assert config["controller"]["groupKindConcurrency"]["Workload.kueue.x-k8s.io"] == 5
    assert config["clientConnection"] == {"qps": 50, "burst": 100}
    # The launcher's own settings stay: no leader election on a bare control plane.
    assert config["leaderElection"] == {"leaderElect": False}
    lifted = upstream.TunedKueue(cluster, deployed=deployed, client_qps=200)
    assert lifted.configuration(**ports)["clientConnection"] == {"qps": 200, "burst": 300}
    assert deployed["clientConnection"]["qps"] == 50  # the shared settings untouched
    off = upstream.TunedKueue(cluster, client_qps=-1).configuration(**ports)
    assert off["clientConnection"]["qps"] == -1
    assert "controller" not in upstream.TunedKueue(cluster).configuration(**ports)


def test_requests_and_cpu_are_net_of_the_background_at_rest() -> None:
    slow = run(
        "all-at-once",
        throughput=1.0,
        admission_s=[1.0],
        requests={"manager": {"PATCH workloads/status": 30, "GET leases": 10}},
        processes={"kfed manager": (0.2, 150.0), "etcd manager": (0.01, 50.0)},
    )
    # At rest the manager's API server served 5 lease reads in 10 s and the manager spent
    # 50 ms; the measured window lasted twice as long, so twice that was background.
    slow.idle_seconds, slow.measured_seconds = 10.0, 20.0
    slow.idle_requests = {"manager": {"GET leases": 5}}
    slow.idle_cpu = {"kfed manager": 0.05, "etcd manager": 0.02}
    found = sidebyside.figures(slow)
    assert found["API requests / workload, manager"] == pytest.approx(3.0)
    # Reads and writes are each net of their own background: a quiet window's writes can
    # never come out above all its requests.
    slow.idle_requests = {"manager": {"GET leases": 1, "PUT leases": 10}}
    writes = sidebyside.figures(slow)["writes / workload, manager"]
    assert writes == pytest.approx(1.0)
    assert sidebyside.figures(slow)["API requests / workload, manager"] == pytest.approx(1.8)
    slow.idle_requests = {"manager": {"GET leases": 5}}
    assert found["writes / workload, manager"] == pytest.approx(3.0)
    assert found["CPU ms / workload, controller manager"] == pytest.approx(10.0)
    # Never below nothing, however busy the rest was.
    assert found["CPU ms / workload, etcd manager"] == 0.0
    assert found["CPU ms / workload, all of them, rest included"] == pytest.approx(21.0)
    # Without an idle window nothing is taken off.
    assert sidebyside.figures(KFED)["CPU ms / workload, controller manager"] == pytest.approx(20)


def test_a_server_side_apply_is_a_write() -> None:
    applied = run(
        upstream.MODE,
        throughput=1.0,
        admission_s=[1.0],
        requests={"manager": {"APPLY workloads/status": 20, "GET workloads": 10}},
        processes={},
    )
    assert sidebyside.figures(applied)["writes / workload, manager"] == pytest.approx(2.0)
