"""Upstream Kueue's own scheduler-performance harness, run on this machine with upstream's
``minimalkueue`` or with kfed's controllers, read into the same figures as kfed's scheduler
benchmark.

    .venv/bin/python -m e2e.bench.scheduler.upstream [--controller minimalkueue|kfed]
        [--compare] [--json FILE]

The harness is upstream's ``test/performance/scheduler`` (its ``minimalkueue``: the core
controllers and the scheduler; its runner: generator, "execution", recorder), built from the
``sigs.k8s.io/kueue`` module by ``e2e/binaries/build-kueue.sh harness``. The runner starts an
envtest control plane from the same Go-built kube-apiserver and etcd as kfed's test bed
(``KUBEBUILDER_ASSETS``), starts the controller binary it is given (``--minimalKueue PATH``,
called with ``--kubeconfig FILE``), plays upstream's baseline generator (it creates Workloads
directly, finishes each admitted one after its runtime with 5 concurrent writers) and writes
``summary.yaml``, ``<binary>.stats.yaml`` (the controller's wall time and rusage) and
per-workload and per-queue CSVs. This module reads those into ``report.Figures``
(upstream's own definitions: its usage, its average time to admission, the controller's wall
time from its start to the end of the run) and samples the CPU time and peak memory of the
kube-apiserver and etcd the runner started.

``--controller kfed`` gives the runner a wrapper, ``kfed-controllers``, that execs kfed's
benchmark controller (``controller_process``: the same controllers ``python -m worker_shim
--no-fencing`` runs) with the runner's kubeconfig: the same runner, generator, recorder and
checker as upstream's own run, nothing else changed.

Run without the controller's logs and without metrics scraping (upstream's Makefile turns both
on by default): they cost CPU that neither side needs here.

``--compare`` runs kfed under upstream's runner and then minimalkueue under it, back to back
in fresh runner processes, waiting for the machine to settle before each, and prints both
tables and the ratios (``compare``). ``--own-runner`` compares kfed's own runner's run
(``python -m e2e.bench.scheduler``, which has extra figures) instead.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from e2e import binaries
from e2e.bench import entry, procstats
from e2e.bench.federation import apirequests
from e2e.bench.scheduler import compare, report
from e2e.bench.scheduler import generator as g
from e2e.bench.scheduler.upstreamfigures import (
    figures_from,
    minimalkueue_process,
    read_queues,
    read_workloads,
)
from e2e.local.process import ManagedProcess

RUNNER = "performance-scheduler-runner"
MINIMALKUEUE = "minimalkueue"
KFED_WRAPPER = "kfed-controllers"
SCENARIO_CONFIG = Path("test/performance/scheduler/configs/baseline")
CRDS = Path("config/components/crd/bases")
# The process names the report uses, by the runner's children's command names (the kernel
# keeps 15 characters of a command name).
PROCESS_NAMES = {
    "kube-apiserver": "kube-apiserver",
    "etcd": "etcd",
}


@dataclass(frozen=True, slots=True)
class Controller:
    """What the runner starts as its controller: the binary, and its name in the report."""

    path: Path
    label: str
    implementation: str

    @property
    def stats_file(self) -> str:
        """The runner writes the command's stats as ``<its file name>.stats.yaml``."""
        return f"{self.path.name}.stats.yaml"


STATS_EVERY_SECONDS = 10.0


def kfed_wrapper_text(python: str, repo: Path, stats: Path | None = None) -> str:
    """The script upstream's runner starts in place of minimalkueue: it execs kfed's benchmark
    controller (the same process, so the runner's rusage is kfed's) with every argument the
    runner gives (``--kubeconfig FILE`` and its optional flags, which the controller accepts).
    ``stats``: the controller's internal figures (cycles, heads, pending reasons, collector)
    appended to that file every ``STATS_EVERY_SECONDS``."""
    tail = (
        f" --stats-every {STATS_EVERY_SECONDS:g} >> {shlex.quote(str(stats))}"
        if stats is not None
        else ""
    )
    return (
        "#!/bin/sh\n"
        "# Started by upstream's scheduler-performance runner in place of minimalkueue.\n"
        f"PYTHONPATH={repo}${{PYTHONPATH:+:$PYTHONPATH}} exec {python} "
        f'-m e2e.bench.scheduler.controller_process "$@"{tail}\n'
    )


def kfed_controller(work: Path, stats: Path | None = None) -> Controller:
    path = work / KFED_WRAPPER
    path.write_text(kfed_wrapper_text(sys.executable, Path(__file__).resolve().parents[3], stats))
    path.chmod(0o755)
    return Controller(path, compare.KFED_CONTROLLER, "kfed's controllers")


def minimalkueue_controller(harness: Path) -> Controller:
    return Controller(
        harness / MINIMALKUEUE,
        compare.UPSTREAM_CONTROLLER,
        f"upstream minimalkueue {harness.name.removeprefix('kueue-')}",
    )


def with_upstream_gates(s: g.Scenario, rangespec: dict[str, Any]) -> g.Scenario:
    """The scenario judged by the harness's own rangespec.yaml (the pinned version's gates,
    which may differ from those kfed's benchmark quotes)."""
    t = s.thresholds
    waits = rangespec.get("wlClassesMaxAvgTimeToAdmissionMs", {})
    return replace(
        s,
        thresholds=g.Thresholds(
            max_wall_seconds=rangespec.get("cmd", {}).get("maxWallMs", 1000 * t.max_wall_seconds)
            / 1000,
            min_usage_percent=float(
                rangespec.get("clusterQueueClassesMinUsage", {}).get("cq", t.min_usage_percent)
            ),
            max_avg_time_to_admission_seconds={
                name: waits.get(name, 1000 * limit) / 1000
                for name, limit in t.max_avg_time_to_admission_seconds.items()
            },
        ),
    )


# -- running it -----------------------------------------------------------------------------


class ProcessWatch:
    """Samples the runner and the processes it started (kube-apiserver, etcd) every half
    second from /proc, keeping for each one the most CPU time and the highest peak
    memory seen: a process that is exiting (a zombie) no longer shows its memory. Every
    ``METRICS_EVERY`` seconds it also reads the API server's request counter through the
    kubeconfig the runner writes (``kubeconfig``), keeping the last read: the requests both
    the runner and the controller made, by verb, resource and failure code."""

    METRICS_EVERY = 15.0

    def __init__(self, runner_pid: int, kubeconfig: Path | None = None) -> None:
        self.runner_pid = runner_pid
        self.kubeconfig = kubeconfig
        self.last: dict[str, procstats.ProcessSample] = {}
        self.last_metrics = ""
        self._next_metrics = time.monotonic() + self.METRICS_EVERY
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="process-watch", daemon=True)

    def __enter__(self) -> ProcessWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()
            if self.kubeconfig is not None and time.monotonic() >= self._next_metrics:
                self._next_metrics = time.monotonic() + self.METRICS_EVERY
                self.read_metrics(self.kubeconfig)

    def read_metrics(self, kubeconfig: Path) -> None:
        if not kubeconfig.exists():
            return
        argv = [str(binaries.path_of("kubectl")), "--kubeconfig", str(kubeconfig)]
        try:
            done = subprocess.run(
                [*argv, "get", "--raw", "/metrics"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        if done.returncode == 0 and apirequests.METRIC in done.stdout:
            self.last_metrics = done.stdout

    def sample(self) -> None:
        targets = {"runner": self.runner_pid}
        for pid, command in procstats.children(self.runner_pid).items():
            name = PROCESS_NAMES.get(command)
            if name is not None:
                targets[name] = pid
        for name, pid in targets.items():
            got = procstats.sample(pid)
            if got is None:
                continue
            seen = self.last.get(name)
            if seen is not None:
                got = procstats.ProcessSample(
                    cpu_seconds=max(got.cpu_seconds, seen.cpu_seconds),
                    rss_mib=got.rss_mib,
                    peak_rss_mib=max(got.peak_rss_mib, seen.peak_rss_mib),
                )
            self.last[name] = got


def assets_dir(root: Path) -> Path:
    """A KUBEBUILDER_ASSETS directory: the test bed's kube-apiserver, etcd and kubectl."""
    assets = root / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    for name in ("kube-apiserver", "etcd", "kubectl"):
        link = assets / name
        if not link.exists():
            link.symlink_to(binaries.path_of(name))
    return assets


def run_harness(
    harness: Path, work: Path, controller: Controller, *, timeout: float
) -> tuple[report.Figures, dict[str, Any]]:
    """Runs upstream's runner with ``controller`` once; returns its figures and the extras for
    the JSON report. Raises RuntimeError when the runner fails (its log's tail says why)."""
    s = g.scenario("baseline")
    out = work / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    src = harness / "src"
    argv = [
        str(harness / RUNNER),
        f"--o={out}",
        f"--crds={src / CRDS}",
        f"--generatorConfig={src / SCENARIO_CONFIG / 'generator.yaml'}",
        f"--minimalKueue={controller.path}",
        f"--timeout={int(timeout)}s",
    ]
    runner = ManagedProcess(
        role="upstream-runner",
        argv=argv,
        log_path=work / "runner.log",
        tie_to_parent=True,
        env={"KUBEBUILDER_ASSETS": str(assets_dir(work))},
        cwd=src,
    )
    load_before = os.getloadavg()
    print(f"upstream's runner: {' '.join(argv)}", flush=True)
    runner.start()
    assert runner.pid is not None
    try:
        with ProcessWatch(runner.pid, out / "kubeconfig") as watch:
            deadline = time.monotonic() + timeout + 120
            while runner.alive and time.monotonic() < deadline:
                time.sleep(1)
        if runner.alive:
            raise RuntimeError(f"upstream's runner still running after {timeout + 120:.0f}s")
        if runner.exit_code() != 0:
            raise RuntimeError(
                f"upstream's runner exited {runner.exit_code()}:\n{runner.log_tail(40)}"
            )
    finally:
        runner.stop()
    cmd_stats = yaml.safe_load((out / controller.stats_file).read_text())
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    figures = figures_from(
        s,
        summary=summary,
        cmd_stats=cmd_stats,
        workloads=read_workloads((out / "wlStates.csv").read_text()),
        queues=read_queues((out / "cqStates.csv").read_text()),
        runner_log=runner.log_path.read_text(errors="replace"),
    )
    figures.processes = {controller.label: minimalkueue_process(cmd_stats)}
    for name in ("kube-apiserver", "etcd", "runner"):
        got = watch.last.get(name)
        if got is not None:
            figures.processes[name] = report.ProcessFigures(got.cpu_seconds, got.peak_rss_mib)
    figures.load_average_before = load_before
    figures.load_average_after = os.getloadavg()
    gates = yaml.safe_load((src / SCENARIO_CONFIG / "rangespec.yaml").read_text())
    requests = apirequests.parse(watch.last_metrics)
    extra = {
        "api_requests": dict(sorted(requests.requests.items(), key=lambda kv: -kv[1])),
        "api_failed": dict(sorted(requests.failed.items(), key=lambda kv: -kv[1])),
        "implementation": controller.implementation,
        "runner": f"upstream's runner {harness.name.removeprefix('kueue-')}",
        "upstream_summary": summary,
        "upstream_rangespec": gates,
        "dropped_workload_events": summary.get("droppedWorkloadEvents", 0),
        "machine": {"cpus": os.cpu_count()},
    }
    return figures, extra


def measure_under_runner(
    which: str,
    *,
    timeout: float,
    keep: Path | None,
    profile: Path | None = None,
    stats: Path | None = None,
) -> dict[str, Any]:
    """One run of upstream's harness with ``which`` controller (``minimalkueue`` or ``kfed``);
    prints its table and returns its JSON report. ``profile``: kfed's controller sampled by
    py-spy into that file, ``stats``: its internal figures, for whoever tunes it."""
    harness = binaries.kueue_dir("harness")
    s = g.scenario("baseline")
    work = Path(tempfile.mkdtemp(prefix="kfed-upstream-harness-"))
    try:
        if which == "kfed":
            controller = kfed_controller(work, stats)
            if profile is not None:
                controller = profiled(controller, work, profile)
        else:
            controller = minimalkueue_controller(harness)
        figures, extra = run_harness(harness, work, controller, timeout=timeout)
        if keep is not None:
            shutil.copytree(work / "artifacts", keep / which, dirs_exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    s = with_upstream_gates(s, extra["upstream_rangespec"])
    data = report.to_json(s, figures, extra)
    title = f"upstream's harness, {controller.implementation}"
    print(report.render(s, figures).replace("scheduler benchmark", title, 1))
    print("API requests (the runner's and the controller's, last read of the counter):")
    for key, count in list(extra["api_requests"].items())[:12]:
        print(f"  {key:<40} {count:>8}")
    for key, count in list(extra["api_failed"].items())[:6]:
        print(f"  failed {key:<33} {count:>8}")
    return data


def profiled(controller: Controller, work: Path, out: Path) -> Controller:
    """The wrapper run under ``py-spy record`` (sampling at 50 Hz, a few % of one core); the
    runner's rusage then includes py-spy's, so a profiled run's CPU figure is not the one to
    quote. ``out`` ending in ``.txt``: collapsed stacks (to read or diff as text), else a
    flame graph SVG."""
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        raise RuntimeError(f"--profile needs py-spy beside {sys.executable} (pip install py-spy)")
    path = work / f"{KFED_WRAPPER}-profiled"
    form = "raw" if out.suffix == ".txt" else "flamegraph"
    path.write_text(
        "#!/bin/sh\n"
        f"exec {py_spy} record --rate 50 --nonblocking --format {form} -o {out} -- "
        f'{controller.path} "$@"\n'
    )
    path.chmod(0o755)
    return Controller(path, controller.label, controller.implementation + " (profiled)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m e2e.bench.scheduler.upstream",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--controller",
        choices=["minimalkueue", "kfed"],
        default="minimalkueue",
        help="the controller upstream's runner starts (without --compare)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="kfed's controllers under upstream's runner, then minimalkueue under it, back to "
        "back, and the ratios",
    )
    p.add_argument(
        "--own-runner",
        action="store_true",
        help="with --compare: kfed's run by kfed's own runner (python -m e2e.bench.scheduler) "
        "instead of upstream's",
    )
    p.add_argument("--json", type=Path, help="also write the JSON report to this file")
    p.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="the runner's recording timeout in seconds (upstream's default is 600)",
    )
    p.add_argument(
        "--keep", type=Path, help="copy the harness's artifacts (summary, CSVs) to this folder"
    )
    p.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="sample kfed's controller with py-spy into this flame graph SVG, or collapsed "
        "stacks if FILE ends in .txt (its CPU figure then includes py-spy's)",
    )
    p.add_argument(
        "--stats",
        type=Path,
        metavar="FILE",
        help="append kfed's controller's internal figures (cycles, heads evaluated and "
        "nominated, pending reasons written, collections, CPU) to FILE every "
        f"{STATS_EVERY_SECONDS:g} s, one JSON line each",
    )
    p.add_argument(
        "--settle-load",
        type=float,
        default=1.0,
        help="before each run, wait (up to 3 minutes) for the 1-minute load average to fall "
        "below this",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = partial(measure_under_runner, timeout=args.timeout, keep=args.keep)
    if not args.compare:
        compare.settle(args.settle_load)
        data = run(args.controller, profile=args.profile, stats=args.stats)
        entry.publish("", report.dumps(data), args.json)
        return 0
    if args.own_runner:
        kfed = compare.run_kfed(args.settle_load)
    else:
        compare.settle(args.settle_load)
        kfed = run("kfed", profile=args.profile, stats=args.stats)
    compare.settle(args.settle_load)
    upstream = run("minimalkueue")
    result = compare.comparison(kfed, upstream)
    result["kfed_runner"] = "kfed's own" if args.own_runner else "upstream's"
    entry.publish(compare.render(result), report.dumps(result), args.json)
    return 0


if __name__ == "__main__":
    sys.argv[0] = "python -m e2e.bench.scheduler.upstream"
    entry.run(main)
