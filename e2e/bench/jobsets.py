"""JobSets through kfed, measured: on a fresh federation (manager + 2 H100 workers, each with
the real JobSet operator), the manager process and a worker shim per worker, submit JobSets
of a driver and four one-GPU workers (5 pods) one after another, and for each measure

- submit -> placed (the MultiKueue check Ready on the manager),
- submit -> all 5 pods Running on the chosen worker (watched on the worker directly),
- submit -> the manager's JobSet Completed (its status copied back),

and the API requests every apiserver served during the run, net of an idle window of the
same length, per JobSet (the chosen worker's writes broken down by verb and resource).
Prints the figures as JSON (``--json FILE`` writes them too).

    python -m e2e.bench.jobsets [--jobsets 10] [--runtime-ms 2000] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from e2e.bench.federation import apirequests, processes
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.jobs import KWOK_DELAY_ANNOTATION, LOCAL_QUEUE, NAMESPACE
from e2e.bench.federation.topology import CHECK, Topology
from e2e.local.federation import MANAGER
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers.jobkinds.jobset import JOBSET
from manager.federation.decisions import checkstatus
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.informer import Event, Informer

WRITES = ("POST", "PUT", "PATCH", "DELETE")
PODS = 5


def jobset(name: str, runtime_ms: int) -> Obj:
    """A driver (cpu only) and 4 one-GPU H100 workers, in the shape the manager's webhook
    gives a queued JobSet (the benchmark runs the manager without it)."""

    def replicated(rj: str, replicas: int, pods: int, gpus: int) -> Obj:
        resources: Obj = {"requests": {"cpu": "100m", "memory": "128Mi"}}
        if gpus:
            resources["requests"]["nvidia.com/gpu"] = str(gpus)
            resources["limits"] = {"nvidia.com/gpu": str(gpus)}
        pod = {
            "metadata": {"annotations": {KWOK_DELAY_ANNOTATION: str(runtime_ms)}},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"gpu.model": "h100"},
                "containers": [{"name": "main", "image": "busybox", "resources": resources}],
            },
        }
        job_spec = {"parallelism": pods, "completions": pods, "template": pod}
        return {"name": rj, "replicas": replicas, "template": {"spec": job_spec}}

    return {
        "apiVersion": JOBSET.resource.api_version,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {C.QUEUE_NAME_LABEL: LOCAL_QUEUE},
        },
        "spec": {
            "suspend": True,
            "managedBy": C.MULTIKUEUE_MANAGED_BY,
            "replicatedJobs": [replicated("driver", 1, 1, 0), replicated("workers", 2, 2, 1)],
        },
    }


class RunningPods:
    """When all of a JobSet's pods first ran at once on a worker (pods watched directly)."""

    def __init__(self, workers: dict[str, KubeApi]) -> None:
        self.running: dict[tuple[str, str], set[str]] = {}
        self.all_running_at: dict[str, tuple[str, float]] = {}
        self.informers = []
        for worker, api in workers.items():
            informer = Informer(api, R.PODS, namespace=NAMESPACE)
            informer.subscribe(functools.partial(self._on_pod, worker))
            self.informers.append(informer)
        self.tasks: list[asyncio.Task[None]] = []

    def _on_pod(self, worker: str, event: Event) -> None:
        meta = event.obj["metadata"]
        name = (meta.get("labels") or {}).get(JOBSET.pod_label)
        if not name:
            return
        pods = self.running.setdefault((worker, name), set())
        phase = (event.obj.get("status") or {}).get("phase")
        if event.type != "DELETED" and phase == "Running" and not meta.get("deletionTimestamp"):
            pods.add(meta["uid"])
        else:
            pods.discard(meta["uid"])
        if len(pods) >= PODS and name not in self.all_running_at:
            self.all_running_at[name] = (worker, time.monotonic())

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(i.run()) for i in self.informers]
        await asyncio.gather(*(i.synced.wait() for i in self.informers))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def placed(api: KubeApi, name: str) -> str | None:
    try:
        js = await api.get(JOBSET.resource, name, NAMESPACE)
        wl_name = JOBSET.workload_name(name, js["metadata"]["uid"])
        wl = await api.get(R.WORKLOADS, wl_name, NAMESPACE)
    except errors.NotFound:
        return None
    state, _ = checkstatus.check_state(wl, CHECK)
    return str(wl["status"].get("clusterName")) if state == "Ready" else None


async def completed(api: KubeApi, name: str) -> bool:
    found = JOBSET.outcome(await api.get(JOBSET.resource, name, NAMESPACE))
    return found is not None and found.succeeded


async def nothing_left(workers: dict[str, KubeApi], name: str) -> bool:
    for api in workers.values():
        for res in (R.WORKLOADS, JOBSET.resource):
            items = (await api.list(res, NAMESPACE))["items"]
            if [i for i in items if name in i["metadata"]["name"]]:
                return False
    return True


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "max": round(ordered[-1], 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


@dataclass(frozen=True, slots=True)
class Run:
    jobset: str
    worker: str
    ran_on: str
    placed_s: float
    all_pods_running_s: float
    completed_s: float


async def one_jobset(bed: Bed, pods: RunningPods, name: str, runtime_ms: int) -> Run:
    """Submit one JobSet and follow it to the end and its copies' removal."""
    api = bed.manager
    t0 = time.monotonic()
    await api.create(JOBSET.resource, jobset(name, runtime_ms), NAMESPACE)
    worker = await wait_for(lambda: placed(api, name), timeout=60, what=f"{name} placed")
    t_placed = time.monotonic() - t0
    await wait_for(
        lambda: name in pods.all_running_at,
        timeout=60,
        interval=0.05,
        what=f"all {PODS} pods of {name} running",
    )
    where, at = pods.all_running_at[name]
    await wait_for(lambda: completed(api, name), timeout=120, what=f"{name} Completed")
    t_done = time.monotonic() - t0
    await wait_for(
        lambda: nothing_left(bed.worker_apis, name), timeout=60, what=f"{name}'s copies removed"
    )
    return Run(name, str(worker), where, t_placed, at - t0, t_done)


async def measure(bed: Bed, count: int, runtime_ms: int) -> dict[str, Any]:
    pods = RunningPods(bed.worker_apis)
    await pods.start()
    runs: list[Run] = []
    try:
        idle_start = await bed.api_requests()
        started = time.monotonic()
        for i in range(count):
            runs.append(await one_jobset(bed, pods, f"js-{i:02d}", runtime_ms))
            print(f"  {runs[-1]}", flush=True)
        run_seconds = time.monotonic() - started
        after = await bed.api_requests()
        # The same length of quiet: what the control planes do with nothing submitted.
        await asyncio.sleep(run_seconds)
        idle_end = await bed.api_requests()
    finally:
        await pods.stop()
    requests: dict[str, Any] = {}
    for cluster in [MANAGER, *bed.workers]:
        busy = apirequests.window(idle_start[cluster], after[cluster]).requests
        idle = apirequests.window(after[cluster], idle_end[cluster]).requests
        net = {k: busy.get(k, 0) - idle.get(k, 0) for k in busy}
        writes = {k: v / count for k, v in net.items() if k.split()[0] in WRITES and v > 0}
        requests[cluster] = {
            "per_jobset_all": round(sum(max(v, 0) for v in net.values()) / count, 1),
            "per_jobset_writes": round(sum(writes.values()), 1),
            "writes_by_request": {k: round(v, 2) for k, v in sorted(writes.items())},
        }
    return {
        "jobsets": count,
        "pods_per_jobset": PODS,
        "runtime_ms": runtime_ms,
        "placed_s": summary([r.placed_s for r in runs]),
        "all_pods_running_s": summary([r.all_pods_running_s for r in runs]),
        "completed_s": summary([r.completed_s for r in runs]),
        "ran_whole_on_the_placed_worker": all(r.worker == r.ran_on for r in runs),
        "requests": requests,
        "runs": [asdict(r) for r in runs],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    topo = Topology(worker_flavors={"worker-1": ("h100",), "worker-2": ("h100",)})
    bed = Bed(topo, name="bench-jobsets", operators=("jobset",))
    print(f"bed up in {bed.up():.1f}s", flush=True)
    manager = None
    try:
        await bed.connect()
        await bed.configure()
        argv = processes.manager_args(bed.fed.kubeconfig(MANAGER), "capacity-aware")
        manager = processes.start_manager("jobsets", argv, bed.logs)
        port = await processes.listening_port(manager)
        await processes.wait_manager_ready(manager, port, bed.workers, fencing=True)
        await bed.wait_unfenced()
        return await measure(bed, args.jobsets, args.runtime_ms)
    finally:
        if manager is not None:
            await bed.stop_manager(manager)
        await bed.close()
        bed.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.jobsets", description=__doc__)
    parser.add_argument("--jobsets", type=int, default=10)
    parser.add_argument("--runtime-ms", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the JSON report to this file")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
