"""`make demo`: the quickstart, the article's story on a local federation, end to end.

1. start a full manager and two full workers (worker-1: RTX A1000 nodes; worker-2: H100
   nodes and one RTX A1000 node), and a local trace receiver;
2. install kfed's CRDs, start a worker shim per worker and the manager (with its webhook,
   metrics and dashboard), exporting traces over OTLP;
3. apply the article's queues (unchanged) on the manager with the MultiKueue check, and
   queues for the GPUs each worker has;
4. register the workers with `kfed cluster add`, from their kubeconfigs;
5. submit the article's two jobs (unchanged) and a burst of 20 more, and show each
   placement as it happens, until all have completed;
6. run two drills on worker-1 and print their reports: a real outage (its kube-apiserver
   killed for 20 s, `kfed drill outage`) under the default at-most-once policy, where
   nothing may move and the probes resume there; then a partition (`kfed drill partition`)
   under the opt-in fast policy, where they move; their JSON reports and timelines
   (`--plot`) are kept in ~/.cache/kfed/drills/NAME, which outlives the federation;
7. print the trace of one job, and where to find the dashboard, metrics, traces and logs.

Everything it started is stopped at the end (``--keep`` leaves it running).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from e2e import binaries
from e2e.examples import ARTICLE_JOBS, CLUSTERQUEUE_PATCH, MULTIKUEUE_CHECK, QUEUES, WORKERS
from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.process import ManagedProcess
from e2e.otlp_sink import TraceSink, story

DEMO_NODES = Path(__file__).with_name("demo-nodes.yaml")
NS = "ml-jobs"
WORKER_NAMES = ("worker-1", "worker-2")
BURST = 20


def worker_offer(queues: Path) -> str:
    """What a worker's queues file offers, for a person: "2 rtx-a1000" or "8 h100, 2 ..."."""
    offers = []
    for doc in yaml.safe_load_all(queues.read_text()):
        if doc and doc.get("kind") == "ClusterQueue":
            for group in doc["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    gpus = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
                    offers.append(f"{gpus.get('nvidia.com/gpu', 0)} {flavor['name']}")
    return ", ".join(offers)


def burst_job(index: int) -> dict[str, Any]:
    """A small training job: one GPU of the given model, running 3-6 s on a kwok node."""
    flavor = "rtx-a1000" if index % 2 else "h100"
    resources = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"burst-{index:02d}",
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/queue-name": "gpu-lq"},
        },
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {
                    "annotations": {
                        "pod-complete.stage.kwok.x-k8s.io/delay": str(3000 + 150 * index)
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"gpu.model": flavor},
                    "containers": [
                        {
                            "name": "train",
                            "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
                            "command": ["bash", "-lc", "nvidia-smi && sleep 5"],
                            "resources": {"requests": resources, "limits": resources},
                        }
                    ],
                },
            },
        },
    }


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Placements:
    """Follows the manager's Workloads and prints each placement once, as it happens."""

    def __init__(self, fed: LocalFederation) -> None:
        self.fed = fed
        self.started = time.monotonic()
        self.placed: dict[str, str] = {}
        self.completed: set[str] = set()

    def poll(self) -> None:
        out = self.fed.kubectl("manager", "get", "workloads", "-n", NS, "-o", "json").stdout
        for wl in json.loads(out)["items"]:
            meta = wl["metadata"]
            job = (meta.get("annotations") or {}).get("kfed.io/job-name") or meta["name"]
            status = wl.get("status") or {}
            cluster = status.get("clusterName")
            if cluster and job not in self.placed:
                self.placed[job] = cluster
                decision = json.loads(
                    (meta.get("annotations") or {}).get("kfed.io/placement", "{}")
                )
                flavors = sorted(
                    {
                        f
                        for psa in (status.get("admission") or {}).get("podSetAssignments") or []
                        for f in (psa.get("flavors") or {}).values()
                    }
                )
                print(
                    f"   +{time.monotonic() - self.started:5.1f}s  {job:<10} -> {cluster:<9}"
                    f" [{', '.join(flavors)}]  {decision.get('reason', '')}",
                    flush=True,
                )
            finished = any(
                c.get("type") == "Finished" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            if finished and job not in self.completed:
                self.completed.add(job)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--name", default="demo")
    parser.add_argument("--keep", action="store_true", help="leave everything running")
    parser.add_argument("--no-drill", action="store_true", help="skip the two drills")
    args = parser.parse_args(argv)

    fed = LocalFederation(args.name, workers=2, full=True, nodes_file=DEMO_NODES)
    step(f"starting local federation {args.name!r}: manager + 2 workers (full mode)")
    fed.up(progress=True)
    processes: list[ManagedProcess] = []
    sink = TraceSink(fed.directory / "traces.jsonl").start()
    try:
        for cluster in fed:
            install_crds(cluster)
        for worker in WORKER_NAMES:
            nodes = fed.kubectl(worker, "get", "nodes", "-L", "gpu.model").stdout.strip()
            print(f"-- {worker} ({fed.cluster(worker).server}):\n{nodes}")
        logs = fed.directory / "logs"
        telemetry = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "500",  # export within half a second, for the demo
        }
        ports = {"manager": free_port(), **{w: free_port() for w in WORKER_NAMES}}
        for worker in WORKER_NAMES:
            proc = ManagedProcess(
                f"shim-{worker}",
                [
                    sys.executable,
                    "-m",
                    "worker_shim",
                    "--kubeconfig",
                    str(fed.kubeconfig(worker)),
                    *("--metrics-host", "127.0.0.1", "--metrics-port", str(ports[worker])),
                ],
                logs / f"shim-{worker}.log",
                env={**telemetry, "OTEL_SERVICE_NAME": f"kfed-shim-{worker}"},
            )
            proc.start()
            processes.append(proc)
        manager = ManagedProcess(
            "manager",
            [
                sys.executable,
                "-m",
                "manager",
                "--kubeconfig",
                str(fed.kubeconfig("manager")),
                *("--webhook-host", "127.0.0.1", "--webhook-port", "0"),
                *("--register-webhook-host", "127.0.0.1"),
                *("--metrics-host", "127.0.0.1", "--metrics-port", str(ports["manager"])),
            ],
            logs / "manager.log",
            env={**telemetry, "OTEL_SERVICE_NAME": "kfed-manager"},
        )
        manager.start()
        processes.append(manager)
        print(f"   manager and worker shims started; logs in {logs}")

        step("manager queues: the article's 01-queues.yaml, unchanged, plus the MultiKueue check")
        fed.kubectl("manager", "apply", "-f", str(QUEUES))
        fed.kubectl("manager", "apply", "-f", str(MULTIKUEUE_CHECK))
        fed.kubectl(
            "manager",
            "patch",
            "clusterqueue",
            "gpu-cq",
            "--type=merge",
            "--patch-file",
            str(CLUSTERQUEUE_PATCH),
        )
        for worker in WORKER_NAMES:
            queues = WORKERS / f"{worker}-queues.yaml"
            fed.kubectl(worker, "apply", "-f", str(queues))
            print(
                f"   {worker}: ClusterQueue gpu-cq with {worker_offer(queues)} GPUs ({queues.name})"
            )

        kfed = str(Path(sys.executable).with_name("kfed"))
        on_manager = ["--kubeconfig", str(fed.kubeconfig("manager"))]
        for worker in WORKER_NAMES:
            step(f"kfed cluster add {worker} --kubeconfig-file <its kubeconfig>")
            subprocess.run(
                [
                    kfed,
                    "cluster",
                    "add",
                    worker,
                    *on_manager,
                    "--kubeconfig-file",
                    str(fed.kubeconfig(worker)),
                ],
                check=True,
            )

        step(
            f"submitting the article's jobs (02-light-job.yaml, 03-heavy-job.yaml), unchanged, "
            f"then a burst of {BURST} one-GPU jobs; placements as they happen:"
        )
        placements = Placements(fed)
        for manifest in ARTICLE_JOBS:
            fed.kubectl("manager", "apply", "-f", str(manifest))
        fed.kubectl(
            "manager",
            "apply",
            "-f",
            "-",
            input=yaml.safe_dump_all([burst_job(i) for i in range(1, BURST + 1)]),
        )
        deadline = time.monotonic() + 300
        while len(placements.completed) < BURST + 2 and time.monotonic() < deadline:
            placements.poll()
            time.sleep(0.5)
        print(
            f"   {len(placements.completed)} of {BURST + 2} jobs completed in "
            f"{time.monotonic() - placements.started:.0f}s "
            "(the global quota admits 2 RTX A1000 and 4 H100 GPUs at a time)"
        )
        step("where each workload went (kfed workloads -A)")
        subprocess.run([kfed, "workloads", "-A", *on_manager], check=False)

        drills = binaries.cache_dir() / "drills" / args.name  # kept after the federation
        if not args.no_drill:
            drills.mkdir(parents=True, exist_ok=True)
            step("an outage drill: worker-1's kube-apiserver killed, kfed drill outage")

            # Under the default policy, at-most-once, nothing moves while worker-1 is down:
            # nothing can prove its copies stopped. Once it is back the probes run on there.
            def e2e_command(verb: str, *extra: str) -> str:
                argv = [sys.executable, "-m", "e2e", verb, "--name", args.name]
                return shlex.join([*argv, "--cluster", "worker-1", *extra])

            repo = Path(__file__).resolve().parent.parent
            drill = subprocess.run(
                [
                    kfed,
                    "drill",
                    "outage",
                    "--cluster",
                    "worker-1",
                    "--hold",
                    "20s",
                    "--break-command",
                    e2e_command("stop", "--kill"),
                    "--restore-command",
                    e2e_command("start"),
                    *on_manager,
                    "--report",
                    str(drills),
                    "--plot",
                    str(drills / "drill-outage.png"),
                ],
                check=False,
                cwd=repo,
            )
            fed.adopt_processes()  # the restarted kube-apiserver is ours to stop at the end
            print(f"   drill exit code: {drill.returncode} (0: passed, no double run)")

            step("a failover drill: kfed drill partition --cluster worker-1")
            # kfed's default policy, at-most-once, moves a cut-off worker's jobs only once it
            # is back (or after the outage timeout); the drill shows the opt-in fast policy,
            # for jobs that may overlap if the worker's own control plane were down.
            fed.kubectl(
                "manager",
                "annotate",
                "--overwrite",
                "clusterqueue",
                "gpu-cq",
                "kfed.io/failover=fast",
            )
            print("   gpu-cq annotated kfed.io/failover=fast (the default is at-most-once)")
            drill = subprocess.run(
                [
                    kfed,
                    "drill",
                    "partition",
                    "--cluster",
                    "worker-1",
                    *on_manager,
                    "--report",
                    str(drills),
                    "--plot",
                    str(drills / "drill-partition.png"),
                ],
                check=False,
            )
            print(f"   drill exit code: {drill.returncode} (0: passed, no double run)")

        step("the trace of light-job, from submit to finish (manager and worker spans)")
        wl = json.loads(fed.kubectl("manager", "get", "workloads", "-n", NS, "-o", "json").stdout)[
            "items"
        ]
        light = next(
            (
                w
                for w in wl
                if (w["metadata"].get("annotations") or {}).get("kfed.io/job-name") == "light-job"
            ),
            None,
        )
        traceparent = ((light or {}).get("metadata", {}).get("annotations") or {}).get(
            "kfed.io/traceparent", ""
        )
        if traceparent:
            trace_id = traceparent.split("-")[1]
            print(f"   trace {trace_id}")
            print(story(sink.trace(trace_id)))

        step("where to look")
        print(f"   dashboard:  http://127.0.0.1:{ports['manager']}/dashboard")
        print(f"   metrics:    http://127.0.0.1:{ports['manager']}/metrics (manager), ", end="")
        print(", ".join(f"http://127.0.0.1:{ports[w]}/metrics ({w})" for w in WORKER_NAMES))
        print(f"   traces:     {sink.path} (OTLP/HTTP receiver at {sink.endpoint})")
        print(f"   logs:       {logs}")
        if not args.no_drill:
            print(f"   drills:     {drills} (JSON reports, timelines drill-*.png; kept)")
        print(f"   kubeconfig: python -m e2e kubeconfig --name {args.name} --cluster manager")
        if args.keep:
            print(
                f"\nleft running (the trace receiver stops with this process); "
                f"stop with: python -m e2e down --name {args.name}"
            )
            return 0
    except BaseException:
        for proc in processes:
            proc.stop()
        fed.down()
        raise
    finally:
        sink.stop()
    for proc in processes:
        proc.stop()
    fed.down()
    step("stopped everything it started")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
