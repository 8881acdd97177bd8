"""A local federation: one manager and N worker control planes on loopback, with its state in
one directory so that another process (``python -m e2e status|down``) can find it again and
so that a crashed run is cleaned up by the next ``up`` or ``down`` of the same name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from e2e import binaries
from e2e.local import autoscaler
from e2e.local import operators as ops
from e2e.local.cluster import LocalCluster
from e2e.local.kwoknodes import NodeGroup
from e2e.local.ports import Ports, free_ports
from e2e.local.process import cmdline_of, pid_alive, terminate_group

DEFAULT_NODES_FILE = Path(__file__).with_name("nodes.yaml")
MANAGER = "manager"


def state_root() -> Path:
    return Path(os.environ.get("KFED_STATE_DIR", binaries.cache_dir() / "clusters"))


def worker_names(count: int) -> list[str]:
    return [f"worker-{i}" for i in range(1, count + 1)]


def load_node_sets(path: Path, clusters: list[str]) -> dict[str, list[NodeGroup]]:
    """Node groups per cluster from a YAML file (see nodes.yaml for the shape, and
    e2e/local/dra.py for a group's ``devices:``); ValueError naming the file when an entry
    is malformed."""
    raw = yaml.safe_load(path.read_text()) or {}
    by_cluster: dict[str, Any] = raw.get("clusters", {})
    result: dict[str, list[NodeGroup]] = {}
    for cluster in clusters:
        entries = by_cluster.get(cluster)
        if entries is None and cluster != MANAGER:
            entries = by_cluster.get("default", [])
        try:
            result[cluster] = [NodeGroup.from_state(e) for e in entries or []]
        except ValueError as err:
            raise ValueError(f"{path}: cluster {cluster!r}: {err}") from None
    return result


class LocalFederation:
    def __init__(
        self,
        name: str,
        *,
        workers: int = 2,
        full: bool = False,
        nodes_file: Path | None = None,
        root: Path | None = None,
        tie_to_parent: bool = False,
        operators: Iterable[str] = (),
        dra: bool | None = None,
        versions: str | None = None,
        cluster_versions: Mapping[str, str] | None = None,
        operator_versions: str | None = None,
    ) -> None:
        """``operators`` (any of jobset, trainer, kuberay; needs ``full``) run on every
        worker; the manager gets their CRDs only, since kfed itself acts there. ``dra``
        (default: on with ``full``) turns on the DRA parts of the full bed: the alpha DRA
        feature gates, the resource-claim controller, and DeviceClasses and ResourceSlices
        for the node groups with ``devices:`` (e2e/local/dra.py). ``versions`` is the set of
        versions.env the clusters run (``pinned`` or ``newest``; default: the bed's,
        ``binaries.bed_set``); ``cluster_versions`` names another for some of them (a
        mixed-version fleet); ``operator_versions`` the set every cluster's operators come
        from (default: each cluster's own)."""
        self.name = name
        self.directory = (root or state_root()) / name
        self.full = full
        self.dra = full if dra is None else dra
        self.tie_to_parent = tie_to_parent
        self.operators = ops.check_names(operators)
        if self.operators and not full:
            raise ValueError("operators need the full test bed (full=True, `up --full`)")
        if self.dra and not full:
            raise ValueError("DRA needs the full test bed (full=True, `up --full`)")
        names = [MANAGER, *worker_names(workers)]
        node_sets = load_node_sets(nodes_file or DEFAULT_NODES_FILE, names) if full else {}
        self.clusters: dict[str, LocalCluster] = {}
        ports = iter(free_ports(3 * len(names)))
        for cluster_name in names:
            self.clusters[cluster_name] = LocalCluster(
                name=cluster_name,
                directory=self.directory / cluster_name,
                ports=Ports(next(ports), next(ports), next(ports)),
                full=full,
                nodes=node_sets.get(cluster_name, []),
                tie_to_parent=tie_to_parent,
                dra=self.dra,
                versions=(cluster_versions or {}).get(cluster_name, versions or binaries.bed_set()),
                operator_versions=operator_versions,
            )

    # -- lifecycle ---------------------------------------------------------------------

    def up(self, *, progress: bool = False) -> float:
        """Start every cluster, wait until all are ready; returns the seconds it took.
        On failure everything started is stopped again before the error propagates."""
        say = _printer(progress)
        for versions in sorted({c.operators_set for c in self.clusters.values()}):
            ops.require_built(self.operators, versions)  # BinariesMissing before anything starts
        cleanup_directory(self.directory)
        self.directory.mkdir(parents=True)
        started = time.monotonic()
        try:
            for cluster in self.clusters.values():
                cluster.prepare()
            say(f"starting etcd + kube-apiserver for {', '.join(self.clusters)}")
            for cluster in self.clusters.values():
                cluster.start_etcd()
                cluster.start_apiserver()
            self.save_state()
            for cluster in self.clusters.values():
                cluster.wait_ready()
                say(f"{cluster.name}: kube-apiserver ready at {cluster.server}")
            if self.full:
                for cluster in self.clusters.values():
                    cluster.start_full_mode()
                    cluster.create_nodes()
                self.save_state()
                for cluster in self.clusters.values():
                    cluster.wait_nodes_ready()
                    count = sum(g.count for g in cluster.nodes)
                    devices = sum(
                        1
                        for m in cluster.dra_manifests()
                        if m["kind"] == "ResourceSlice" and "devices" in m["spec"]
                    )
                    with_dra = f", {devices} with DRA devices" if devices else ""
                    say(
                        f"{cluster.name}: controller-manager, scheduler, kwok up; "
                        f"{count} nodes{with_dra}"
                    )
            if self.operators:
                self._start_operators(say)
            self._start_autoscalers(say)
        except BaseException:
            self.down()
            raise
        self.save_state()
        return time.monotonic() - started

    def _start_operators(self, say: Any) -> None:
        names = ", ".join(self.operators)
        # kubectl and the readiness checks run in threads, one per cluster (the CRDs cost each
        # kube-apiserver several CPU-seconds); the operators start from this thread, since
        # they die with the thread that started them.
        with ThreadPoolExecutor(max_workers=len(self.clusters)) as pool:
            list(pool.map(lambda c: ops.install_crds(c, self.operators), self.clusters.values()))
            say(f"CRDs of {names} installed on {', '.join(self.clusters)}")
            running = [ops.start(c, self.operators) for c in self.workers]
            self.save_state()
            list(pool.map(lambda r: r.wait_ready(), running))
        say(f"{names} ready on {', '.join(c.name for c in self.workers)}")

    def _start_autoscalers(self, say: Any) -> None:
        """Karpenter on each cluster with a node group that grows (``maxNodes``)."""
        for cluster in self.clusters.values():
            if not autoscaler.growing(cluster.nodes):
                continue
            health = autoscaler.start(cluster)
            self.save_state()
            autoscaler.wait_ready(cluster, health)
            pools = ", ".join(g.name for g in autoscaler.growing(cluster.nodes))
            say(f"{cluster.name}: karpenter ready, growing {pools}")

    def down(self) -> None:
        for cluster in self.clusters.values():
            cluster.stop()
        cleanup_directory(self.directory)

    # -- outages -------------------------------------------------------------------------

    def stop_role(self, cluster: str, role: str, *, kill: bool = False) -> None:
        """Stop one process of one cluster, as an outage would (``kill``: SIGKILL at once, as
        a crash would). Its command line stays in the state, so ``start_role`` can bring it
        back, from this process or another one (``python -m e2e start``)."""
        self.cluster(cluster).stop_role(role, kill=kill)
        self.save_state()

    def start_role(self, cluster: str, role: str, *, timeout: float = 90.0) -> None:
        """Start a stopped process again with its command line (same ports, same data) and,
        for an API server, wait until it serves."""
        local = self.cluster(cluster)
        proc = local.processes[role]  # an unknown role is a mistake, never a silent no-op
        if proc.alive:
            raise RuntimeError(f"{cluster}: {role} is already running (pid {proc.pid})")
        proc.start()
        self.save_state()
        if role == "kube-apiserver":
            # An operator may exit while its API server is gone (the MPI operator's leader
            # election ends the process once it cannot renew): as a kubelet restarts such a
            # pod, it starts again once the server serves.
            exited = [p for r, p in local.processes.items() if r in ops.OPERATORS and not p.alive]
            local.wait_ready(timeout=timeout, exited_ok=tuple(p.role for p in exited))
            for operator in exited:
                operator.start()
            self.save_state()

    def adopt_processes(self) -> None:
        """Take over the processes another command started for this federation (``python -m
        e2e start`` writes their pids to the state file), so that this object stops them."""
        state = json.loads(self.state_file.read_text())
        for name, cluster in state["clusters"].items():
            for role, saved in cluster["processes"].items():
                proc = self.cluster(name).processes.get(role)
                if proc is not None and saved["pid"] != proc.pid:
                    proc.adopt(saved["pid"])

    def __enter__(self) -> LocalFederation:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- access ------------------------------------------------------------------------

    def cluster(self, name: str) -> LocalCluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise KeyError(f"no cluster {name!r}; have {', '.join(self.clusters)}") from None

    @property
    def workers(self) -> list[LocalCluster]:
        return [c for name, c in self.clusters.items() if name != MANAGER]

    def kubeconfig(self, cluster: str) -> Path:
        return self.cluster(cluster).kubeconfig

    def kubectl(
        self, cluster: str, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.cluster(cluster).kubectl(*args, input=input, check=check)

    def __iter__(self) -> Iterator[LocalCluster]:
        return iter(self.clusters.values())

    # -- state -------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    def save_state(self) -> None:
        state = {
            "name": self.name,
            "full": self.full,
            "dra": self.dra,
            "operators": list(self.operators),
            "clusters": {n: c.to_state() for n, c in self.clusters.items()},
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    @classmethod
    def load(cls, name: str, *, root: Path | None = None) -> LocalFederation:
        directory = (root or state_root()) / name
        try:
            state = json.loads((directory / "state.json").read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no local federation named {name!r} in {directory.parent}"
            ) from None
        fed = cls.__new__(cls)
        fed.name = name
        fed.directory = directory
        fed.full = state["full"]
        fed.dra = state.get("dra", False)
        fed.operators = tuple(state.get("operators", ()))
        fed.tie_to_parent = False
        fed.clusters = {n: LocalCluster.from_state(c) for n, c in state["clusters"].items()}
        return fed

    def status(self) -> list[dict[str, Any]]:
        rows = []
        for cluster in self.clusters.values():
            rows.append(
                {
                    "cluster": cluster.name,
                    "server": cluster.server,
                    "ready": cluster.is_ready(),
                    "kubeconfig": str(cluster.kubeconfig),
                    "processes": {
                        role: {"pid": p.pid, "alive": p.pid is not None and pid_alive(p.pid)}
                        for role, p in cluster.processes.items()
                    },
                }
            )
        return rows


def processes_under(directory: Path) -> list[int]:
    """Pids of running processes whose command line names a path inside ``directory``:
    found from /proc, so it works even when a crashed run never wrote its state file."""
    marker = str(directory) + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if (
            entry.name.isdigit()
            and int(entry.name) != os.getpid()
            and marker in cmdline_of(int(entry.name))
        ):
            found.append(int(entry.name))
    return found


def cleanup_directory(directory: Path) -> None:
    """Stop every process a previous run left under ``directory`` and remove it."""
    for pid in processes_under(directory):
        terminate_group(pid, grace=3)
    shutil.rmtree(directory, ignore_errors=True)


def _printer(enabled: bool) -> Any:
    started = time.monotonic()

    def say(message: str) -> None:
        if enabled:
            print(f"[{time.monotonic() - started:5.1f}s] {message}", flush=True)

    return say
