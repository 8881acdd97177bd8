"""The benchmark's test bed: a fresh full local federation (manager + 3 workers, each with
etcd, kube-apiserver, controller-manager, scheduler and kwok GPU nodes from the topology), kfed's
CRDs, the queues, the workers registered on the manager, a worker shim per worker, and a
cuttable proxy in front of each worker's apiserver for the drills. Everything lives in one
temporary directory and is stopped and removed at the end (also on Ctrl-C, and by the kernel
if the benchmark is killed).

The manager reaches the workers directly while dispatch is measured (no proxy in the path:
the proxy runs in the benchmark's own process and would take its CPU); for the drills the
workers' Secrets are re-applied with the proxies' addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from e2e import binaries
from e2e.bench import procstats
from e2e.bench.federation import apirequests, processes, topology
from e2e.bench.federation.topology import Applied, Topology
from e2e.local.cluster import LocalCluster
from e2e.local.crds import install_crds
from e2e.local.federation import MANAGER, LocalFederation, worker_names
from e2e.local.process import ManagedProcess
from e2e.local.proxy import CuttableProxy
from e2e.waiting import wait_for
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

FIELD_MANAGER = "kfed-bench"


def kubeconfig_via(path: Path, server: str) -> str:
    """The worker's admin kubeconfig (embedded data only) with another server address."""
    config = yaml.safe_load(path.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    return str(yaml.safe_dump(config))


async def apply(api: KubeApi, objects: Iterable[Applied]) -> None:
    """Server-side apply: creates or updates, the same call on a fresh or a used bed."""
    for res, body in objects:
        meta = body["metadata"]
        await api.patch(
            res,
            meta["name"],
            body,
            meta.get("namespace"),
            kind="apply",
            force=True,
            field_manager=FIELD_MANAGER,
        )


class Bed:
    def __init__(
        self,
        topo: Topology,
        *,
        name: str = "bench-federation",
        operators: tuple[str, ...] = (),
        full: bool = True,
        crds: Callable[[LocalCluster], None] = install_crds,
    ) -> None:
        """``full``: every cluster with controller-manager, scheduler and kwok nodes (the
        Jobs run); else lite control planes, etcd and kube-apiserver only (nothing runs:
        enough where only admission is measured). ``crds`` installs the API on each cluster
        (kfed's; upstream Kueue's where upstream's controllers run instead)."""
        if worker_names(len(topo.workers)) != topo.workers:
            raise ValueError(
                f"the topology must name its workers {worker_names(len(topo.workers))}, "
                f"as e2e.local does; it names {topo.workers}"
            )
        self.topology = topo
        self._install_crds = crds
        self.root = Path(tempfile.mkdtemp(prefix="kfed-bench-fed-"))
        self.logs = self.root / "kfed-logs"
        nodes = self.root / "nodes.yaml"
        nodes.write_text(yaml.safe_dump(topology.nodes_file(topo)))
        self.fed = LocalFederation(
            name,
            workers=len(topo.workers),
            full=full,
            nodes_file=nodes,
            root=self.root,
            tie_to_parent=True,
            operators=operators,
        )
        self.proxies: dict[str, CuttableProxy] = {}
        self.shims: dict[str, ManagedProcess] = {}
        self.shim_flags: list[str] = []
        """Extra flags for every ``python -m worker_shim`` this bed starts."""
        self.shim_ports: dict[str, int] = {}
        self.manager_api: KubeApi | None = None
        self.worker_apis: dict[str, KubeApi] = {}

    @property
    def workers(self) -> list[str]:
        return self.topology.workers

    # -- lifecycle (main thread: children are tied to it) ---------------------------------

    def up(self) -> float:
        binaries.path_of("kube-apiserver")  # a clear error when the binaries are not built
        seconds = self.fed.up(progress=True)
        for cluster in self.fed:
            self._install_crds(cluster)
        for worker in self.fed.workers:
            self.proxies[worker.name] = CuttableProxy(worker.ports.apiserver).start()
        return seconds

    async def connect(self) -> None:
        self.manager_api = await KubeApi.from_kubeconfig_file(
            self.fed.kubeconfig(MANAGER), name="bench:manager"
        )
        for worker in self.workers:
            self.worker_apis[worker] = await KubeApi.from_kubeconfig_file(
                self.fed.kubeconfig(worker), name=f"bench:{worker}"
            )

    async def configure(
        self,
        manager_queues: Iterable[Applied] | None = None,
        worker_queues: Callable[[str], Iterable[Applied]] | None = None,
    ) -> None:
        """Queues everywhere (the topology's unless given), workers registered directly, a
        shim per worker."""
        if manager_queues is None:
            manager_queues = topology.manager_queues(self.topology)
        await apply(self.manager, manager_queues)
        for worker in self.workers:
            objects = (
                worker_queues(worker)
                if worker_queues is not None
                else topology.worker_queues(self.topology, worker)
            )
            await apply(self.worker_apis[worker], objects)
        await self.register(via_proxies=False)
        for worker in self.workers:
            self.shims[worker] = processes.start_shim(
                worker, self.fed.kubeconfig(worker), self.logs, self.shim_flags
            )
        for worker, shim in self.shims.items():
            self.shim_ports[worker] = await processes.listening_port(shim)

    async def register(self, *, via_proxies: bool) -> None:
        kubeconfigs = {
            worker: kubeconfig_via(
                self.fed.kubeconfig(worker),
                self.proxies[worker].url if via_proxies else self.fed.cluster(worker).server,
            )
            for worker in self.workers
        }
        await apply(self.manager, topology.registration(kubeconfigs))

    async def wait_unfenced(self, *, timeout: float = 60) -> None:
        """Until no shim fences the manager's origin. Between two managers the workers'
        lease may expire and the shims fence; they stop once they see the new manager's
        renewals, and a copy created before that would be fenced at once."""

        async def unfenced() -> bool:
            for port in self.shim_ports.values():
                text = await processes.get_text(f"http://127.0.0.1:{port}/metrics")
                if processes.fenced_origins(text):
                    return False
            return True

        await wait_for(unfenced, timeout=timeout, what="no worker shim fencing", interval=0.2)

    async def stop_manager(self, proc: ManagedProcess) -> None:
        """SIGTERM, then remove its leader Lease: the manager does not always release it on
        the way out, and the next one would wait for it to expire while the workers'
        fencing lease runs out too."""
        proc.stop()
        with contextlib.suppress(errors.NotFound):
            await self.manager.delete(
                R.LEASES, processes.LEADER_LEASE, topology.FEDERATION_NAMESPACE
            )

    @property
    def manager(self) -> KubeApi:
        if self.manager_api is None:
            raise RuntimeError("Bed.connect() first")
        return self.manager_api

    async def close(self) -> None:
        for shim in self.shims.values():
            shim.stop()
        if self.manager_api is not None:
            await self.manager_api.close()
        for api in self.worker_apis.values():
            await api.close()

    def down(self) -> None:
        for shim in self.shims.values():
            shim.stop()
        for proxy in self.proxies.values():
            proxy.stop()
        self.fed.down()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- API requests -------------------------------------------------------------------

    async def api_requests(self) -> dict[str, apirequests.Snapshot]:
        """Every cluster's ``apiserver_request_total`` now (read in threads, at once)."""

        def read(name: str) -> apirequests.Snapshot:
            status, body = self.fed.cluster(name).api_get("/metrics", timeout=30)
            if status != 200:
                raise RuntimeError(f"{name}: GET /metrics answered {status}")
            return apirequests.parse(body.decode())

        names = [MANAGER, *self.workers]
        reads = await asyncio.gather(*(asyncio.to_thread(read, n) for n in names))
        return dict(zip(names, reads, strict=True))

    # -- CPU -----------------------------------------------------------------------------

    def cpu_groups(self, manager: ManagedProcess | None) -> dict[str, list[int]]:
        """Processes whose CPU time the report shows, grouped as a reader asks about them."""

        def pids(procs: Iterable[ManagedProcess]) -> list[int]:
            return [p.pid for p in procs if p.pid is not None]

        groups = {
            "kfed manager": pids([manager] if manager is not None else []),
            f"kfed worker shims ({len(self.shims)})": pids(self.shims.values()),
            "manager control plane": pids(self.fed.cluster(MANAGER).processes.values()),
            f"worker control planes ({len(self.fed.workers)})": pids(
                p for w in self.fed.workers for p in w.processes.values()
            ),
            "benchmark (this process)": [os.getpid()],
        }
        return groups

    def cpu_seconds(self, manager: ManagedProcess | None) -> dict[str, float]:
        result = {}
        for name, pids in self.cpu_groups(manager).items():
            total = 0.0
            for pid in pids:
                sample = procstats.sample(pid)
                total += sample.cpu_seconds if sample is not None else 0.0
            result[name] = total
        return result
