"""`make demo`: the article's story on a local federation.

1. start a full manager and two full workers (worker-1: RTX A1000 nodes, worker-2: H100);
2. install kfed's CRDs, start a worker shim per worker and the manager (with its webhook);
3. register the workers with `kfed cluster add`;
4. apply the article's queues (unchanged) on the manager, with the MultiKueue check, and
   per-worker queues for the GPUs each worker has;
5. submit the article's two jobs (unchanged) and show where each goes and that it completes.

Everything it started is stopped at the end (``--keep`` leaves it running).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.process import ManagedProcess

SEED = Path(__file__).resolve().parents[2] / "shared" / "seed" / "examples"
WORKER_GPUS = {"worker-1": ("rtx-a1000", 2), "worker-2": ("h100", 4)}


def worker_queues(flavor: str, gpus: int) -> list[dict[str, Any]]:
    group = "kueue.x-k8s.io/v1beta2"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-jobs"}},
        {
            "apiVersion": group,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"gpu.model": flavor}},
        },
        {
            "apiVersion": group,
            "kind": "ClusterQueue",
            "metadata": {"name": "gpu-cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 64},
                                    {"name": "memory", "nominalQuota": "512Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": group,
            "kind": "LocalQueue",
            "metadata": {"name": "gpu-lq", "namespace": "ml-jobs"},
            "spec": {"clusterQueue": "gpu-cq"},
        },
    ]


MANAGER_CHECK = [
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "multikueue"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "MultiKueueConfig",
                "name": "workers",
            },
        },
    },
]


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--name", default="demo")
    parser.add_argument("--keep", action="store_true", help="leave everything running")
    args = parser.parse_args(argv)

    fed = LocalFederation(args.name, workers=2, full=True)
    step(f"starting local federation {args.name!r}: manager + 2 workers (full mode)")
    fed.up(progress=True)
    processes: list[ManagedProcess] = []
    try:
        for cluster in fed:
            install_crds(cluster)
        for worker in WORKER_GPUS:
            nodes = fed.kubectl(worker, "get", "nodes", "-L", "gpu.model").stdout.strip()
            print(f"-- {worker} ({fed.cluster(worker).server}):\n{nodes}")
        logs = fed.directory / "logs"
        for worker in ("worker-1", "worker-2"):
            proc = ManagedProcess(
                f"shim-{worker}",
                [sys.executable, "-m", "worker_shim", "--kubeconfig", str(fed.kubeconfig(worker))],
                logs / f"shim-{worker}.log",
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
                "--webhook-host",
                "127.0.0.1",
                "--webhook-port",
                "0",
                "--register-webhook-host",
                "127.0.0.1",
            ],
            logs / "manager.log",
        )
        manager.start()
        processes.append(manager)
        print(f"   manager and worker shims started; logs in {logs}")

        step("manager queues: the article's 01-queues.yaml, unchanged, plus the MultiKueue check")
        fed.kubectl("manager", "apply", "-f", "-", input=yaml.safe_dump_all(MANAGER_CHECK))
        fed.kubectl("manager", "apply", "-f", str(SEED / "01-queues.yaml"))
        patch = '{"spec":{"admissionChecksStrategy":{"admissionChecks":[{"name":"multikueue"}]}}}'
        fed.kubectl("manager", "patch", "clusterqueue", "gpu-cq", "--type=merge", "-p", patch)
        for worker, (flavor, gpus) in WORKER_GPUS.items():
            fed.kubectl(
                worker, "apply", "-f", "-", input=yaml.safe_dump_all(worker_queues(flavor, gpus))
            )
            print(f"   {worker}: ClusterQueue gpu-cq with {gpus} {flavor} GPUs")

        kfed = str(Path(sys.executable).with_name("kfed"))
        on_manager = ["--kubeconfig", str(fed.kubeconfig("manager"))]
        for worker in WORKER_GPUS:
            step(f"kfed cluster add {worker}")
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

        step("submitting the article's jobs (02-light-job.yaml, 03-heavy-job.yaml) to the manager")
        for manifest in ("02-light-job.yaml", "03-heavy-job.yaml"):
            print(
                "   " + fed.kubectl("manager", "apply", "-f", str(SEED / manifest)).stdout.strip()
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            jobs = fed.kubectl(
                "manager",
                "get",
                "jobs",
                "-n",
                "ml-jobs",
                "-o",
                'jsonpath={range .items[*]}{.status.succeeded}{"\\n"}{end}',
            ).stdout.split()
            if jobs.count("1") == 2:
                break
            time.sleep(1)
        step("where each workload went (kfed workloads -A) and the manager's Jobs")
        subprocess.run([kfed, "workloads", "-A", *on_manager], check=False)
        print(fed.kubectl("manager", "get", "jobs", "-n", "ml-jobs").stdout)
        if args.keep:
            print(f"\nleft running; stop with: python -m e2e down --name {args.name}")
            return 0
    except BaseException:
        for proc in processes:
            proc.stop()
        fed.down()
        raise
    for proc in processes:
        proc.stop()
    fed.down()
    step("stopped everything it started")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
