"""One real node joined to one LocalCluster: its containerd and kubelet as processes of the
cluster (logged to its logs/, listed by ``python -m e2e status``), plus what the test bed
lacks for Deployments to run there: a second controller-manager with the deployment,
replicaset, root-CA-publisher and EndpointSlice controllers (the bed's own runs only what
Jobs need; a Service's endpoints let kube-apiserver reach an aggregated API), and
the API server's address for host-network Pods (the bed has no kube-proxy, so the
``kubernetes`` Service's ClusterIP leads nowhere) in ConfigMap
``kueue-system/kfed-testbed-apiserver``, which the testbed overlays load with ``envFrom``.

Stopping is thorough, since containers outlive their runtime: the kubelet stops, every
process in the node's cgroup root is killed, containerd and its shims stop, the mounts under
the node's directory are detached and the kernel settings restored. A node left behind by a
run killed with -9 is found again through its record in /run and cleaned up by the next start
(or ``cleanup_stale``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from e2e import binaries
from e2e.local.cluster import LocalCluster
from e2e.local.federation import processes_under
from e2e.local.ports import free_ports
from e2e.local.process import terminate_group
from e2e.realnode import cgroups, host, kernel, mounts
from e2e.realnode.containerd import Containerd
from e2e.realnode.kubelet import Kubelet, node_name
from e2e.waiting import WaitTimeout, wait_for_sync

APISERVER_CONFIGMAP = ("kueue-system", "kfed-testbed-apiserver")
APPS_CONTROLLERS_ROLE = "kube-controller-manager-apps"
FIELD_MANAGER = "kfed-realnode"


class RealNodeError(RuntimeError):
    """A node did not come up; the message carries the failing process's log tail."""


def cgroup_root_for(directory: Path) -> str:
    return "kfed-realnode-" + hashlib.sha256(str(directory).encode()).hexdigest()[:10]


def _records() -> Path:
    return kernel.run_dir() / "nodes"


class RealNode:
    """``RealNode(cluster).start()`` ... ``stop()``; ``import_image`` in between."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.directory = cluster.directory / "realnode"
        self.name = node_name(cluster.name)
        self.cgroup_root = cgroup_root_for(self.directory)
        self.containerd = Containerd(self.directory / "containerd")

    # -- start -------------------------------------------------------------------------

    def start(self, *, timeout: float = 90.0) -> float:
        """Start containerd and the kubelet and wait until the node is Ready; returns the
        seconds it took. On failure everything started is stopped before the error."""
        host.require()
        cleanup_stale()
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        _records().mkdir(parents=True, exist_ok=True)
        self._record().write_text(json.dumps({"directory": str(self.directory)}))
        try:
            self._start_apps_controllers()
            self.containerd.write_config()
            cgroups.create(self.cgroup_root)
            kernel.hold(self.directory)  # before containerd: it needs the raised inotify limit
            ctr = self.cluster.start_process("containerd", self.containerd.argv())
            self.containerd.wait_ready(lambda: ctr.alive, ctr.log_path)
            self.containerd.import_pause_image()
            port, healthz = free_ports(2)
            kubelet = Kubelet(
                directory=self.directory / "kubelet",
                node=self.name,
                server=self.cluster.server,
                pki_dir=self.cluster.directory / "pki",
                runtime_endpoint=self.containerd.endpoint,
                cgroup_root=self.cgroup_root,
                port=port,
                healthz_port=healthz,
            )
            kubelet.write_files()
            self.cluster.start_process("kubelet", kubelet.argv())
            self._publish_apiserver_address()
            self._wait_ready(deadline=started + timeout)
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - started

    def _start_apps_controllers(self) -> None:
        pki = self.cluster.directory / "pki"
        self.cluster.start_process(
            APPS_CONTROLLERS_ROLE,
            [
                str(binaries.path_of("kube-controller-manager")),
                f"--kubeconfig={self.cluster.kubeconfig}",
                "--controllers=deployment-controller,replicaset-controller,"
                "root-ca-certificate-publisher-controller,endpointslice-controller",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=0",
            ],
        )

    def _publish_apiserver_address(self) -> None:
        namespace, name = APISERVER_CONFIGMAP
        self.cluster.apply_objects(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": {
                        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                        "KUBERNETES_SERVICE_PORT": str(self.cluster.ports.apiserver),
                    },
                },
            ],
            field_manager=FIELD_MANAGER,
        )

    def _wait_ready(self, *, deadline: float) -> None:
        def ready_or_dead() -> bool:
            for role in ("containerd", "kubelet"):
                proc = self.cluster.processes[role]
                if not proc.alive:
                    raise RealNodeError(
                        f"{self.cluster.name}: {role} exited (code {proc.exit_code()}); "
                        f"log {proc.log_path}:\n{proc.log_tail()}"
                    )
            return self.ready()

        try:
            wait_for_sync(
                ready_or_dead,
                timeout=max(deadline - time.monotonic(), 1.0),
                what=f"node {self.name} Ready",
                interval=0.5,
            )
        except WaitTimeout as err:
            kubelet = self.cluster.processes["kubelet"]
            raise RealNodeError(
                f"{self.cluster.name}: {err}; log {kubelet.log_path}:\n{kubelet.log_tail()}"
            ) from None

    def ready(self) -> bool:
        status, body = self.cluster.api_get(f"/api/v1/nodes/{self.name}")
        if status != 200:
            return False
        conditions = json.loads(body).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # -- images and logs ---------------------------------------------------------------

    def import_image(self, archive: Path) -> list[str]:
        """Import a `docker save` archive into the node's containerd (CRI namespace)."""
        return self.containerd.import_archive(archive)

    def pod_logs(self, namespace: str, pod_prefix: str, *, lines: int = 40) -> str:
        """The last lines of the logs of this node's Pods whose name starts with
        ``pod_prefix`` (``kubectl logs`` cannot reach a kubelet on loopback)."""
        root = self.directory / "kubelet" / "pod-logs"
        parts = []
        for log in sorted(root.glob(f"{namespace}_{pod_prefix}*/*/*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"== {log.relative_to(root)}\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no logs under {root} for {namespace}/{pod_prefix}*)"

    # -- stop --------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop the node and undo what it did to the host; returns what could not be undone
        (empty when all went)."""
        for role in ("kubelet", APPS_CONTROLLERS_ROLE):
            proc = self.cluster.processes.get(role)
            if proc is not None:
                proc.stop()
        # Containers first (through the cgroup root), then containerd and its shims.
        problems = cleanup(self.directory)
        containerd = self.cluster.processes.get("containerd")
        if containerd is not None:
            containerd.stop()  # already ended by cleanup; this forgets its pid
        return problems

    def _record(self) -> Path:
        return _records() / f"{self.cgroup_root}.json"


def cleanup(directory: Path) -> list[str]:
    """Undo a node whose directory is ``directory``, whether its processes run or not:
    kubelet stopped, its containers killed (through its cgroup root), containerd and the
    shims stopped, mounts detached, kernel settings restored once no node holds them, its
    record removed. Returns what could not be undone."""
    for pid in processes_under(directory / "kubelet"):
        terminate_group(pid, grace=10)
    problems = cgroups.remove(cgroup_root_for(directory))
    for pid in processes_under(directory):  # containerd (SIGTERM first), then its shims
        terminate_group(pid, grace=10)
    problems += mounts.unmount_all(directory)
    kernel.release(directory)
    (_records() / f"{cgroup_root_for(directory)}.json").unlink(missing_ok=True)
    _forget_container_log_links(directory)
    return problems


def _forget_container_log_links(directory: Path) -> None:
    # The kubelet links every container's log into /var/log/containers (a fixed path).
    links = Path("/var/log/containers")
    if links.is_dir():
        for link in links.iterdir():
            if link.is_symlink() and str(directory) in str(link.readlink()):
                link.unlink(missing_ok=True)


def recorded_directories() -> Iterator[Path]:
    if _records().is_dir():
        for record in _records().glob("*.json"):
            try:
                yield Path(json.loads(record.read_text())["directory"])
            except (OSError, ValueError, KeyError):
                record.unlink(missing_ok=True)


def cleanup_stale() -> None:
    """Clean up every node of this machine whose kubelet and containerd are gone (a run
    killed with -9), and restore the kernel settings if no node holds them."""
    for directory in list(recorded_directories()):
        if not processes_under(directory):
            cleanup(directory)
    kernel.release_stale()


def cleanup_under(root: Path) -> None:
    """Clean up every node whose directory is under ``root`` (``python -m e2e down``)."""
    for directory in list(recorded_directories()):
        if directory == root or root in directory.parents:
            cleanup(directory)


def docker_save(image: str, archive: Path) -> Path:
    """``docker save`` an image to a file, for ``import_image`` (one file, many nodes)."""
    result = subprocess.run(
        ["docker", "save", "--output", str(archive), image],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RealNodeError(f"docker save {image} failed: {result.stderr.strip()}")
    return archive
