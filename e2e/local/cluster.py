"""One local Kubernetes control plane: etcd + kube-apiserver (TLS, client-certificate admin,
RBAC on), plus, in full mode, kube-controller-manager, kube-scheduler and kwok with fake GPU
nodes so that Jobs really get pods scheduled and completed, and their containers have a log
(kwok's server plays the nodes' kubelet for ``kubectl logs``; see ``pod_log_file``). With
``dra`` (full mode), the nodes' fake GPUs are also published through Dynamic Resource
Allocation: DeviceClasses and one ResourceSlice per node (``e2e/local/dra.py``), allocated
by the real kube-scheduler, claims made by the controller-manager's resource-claim
controller."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e import binaries
from e2e.local import dra, kwoknodes, pki
from e2e.local.errors import ClusterStartError, KubectlError
from e2e.local.kwoknodes import KWOK_NODE_ANNOTATION, NodeGroup
from e2e.local.pki import kubeconfig_dict
from e2e.local.ports import Ports, free_ports
from e2e.local.process import ManagedProcess

STAGES_FILE = Path(__file__).with_name("kwok-stages.yaml")
POD_LOG_TEMPLATE = Path(__file__).with_name("kwok-pod.log")
"""What every container of a full cluster logs (CRI log format), until a test appends more."""


@dataclass
class LocalCluster:
    name: str
    directory: Path
    ports: Ports
    full: bool = False
    nodes: list[NodeGroup] = field(default_factory=list)
    tie_to_parent: bool = False
    dra: bool = False
    """Full mode with DRA: the alpha DRA gates on (``dra.FEATURE_GATES``), the
    resource-claim controller running, DeviceClasses and ResourceSlices from ``nodes``."""
    versions: str = field(default_factory=binaries.bed_set)
    """The set of versions.env its binaries come from (a mixed fleet runs both)."""
    operator_versions: str | None = None  # see operators_set
    processes: dict[str, ManagedProcess] = field(default_factory=dict)

    # -- files -------------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def _pki(self) -> Path:
        return self.directory / "pki"

    @property
    def pod_log_file(self) -> Path:
        """The log kwok serves for every container of this (full) cluster, in CRI log format
        (``<RFC 3339 time> stdout F <text>``): what ``kubectl logs`` prints. A line appended
        while a log is followed is streamed to the follower."""
        return self.directory / "kwok" / "pod.log"

    @property
    def _kwok_logs_config(self) -> Path:
        return self.directory / "kwok" / "logs.yaml"

    def prepare(self) -> None:
        """Write certificates and the admin kubeconfig (with embedded data, no file paths,
        so it can be handed to kfed as a Secret unchanged)."""
        self._pki.mkdir(parents=True, exist_ok=True)
        ca = pki.CertificateAuthority(f"kfed-{self.name}-ca")
        ca.pair.write(self._pki, "ca")
        ca.issue("kube-apiserver", server_hosts=("127.0.0.1", "localhost", "10.0.0.1")).write(
            self._pki, "apiserver"
        )
        admin = ca.issue("kfed-admin", organization="system:masters")
        admin.write(self._pki, "admin")
        pki.service_account_keys().write(self._pki, "sa")
        # The front proxy kube-apiserver presents to aggregated API servers (the manager's
        # visibility API): its own CA, as kubeadm sets it up.
        front_proxy = pki.CertificateAuthority(f"kfed-{self.name}-front-proxy-ca")
        front_proxy.pair.write(self._pki, "front-proxy-ca")
        front_proxy.issue("front-proxy-client").write(self._pki, "front-proxy-client")
        if self.full:
            self._prepare_kwok_server(ca)
        self.kubeconfig.write_text(
            yaml.safe_dump(kubeconfig_dict(self.name, self.server, ca.pair.cert_pem, admin))
        )
        self.kubeconfig.chmod(0o600)

    def _prepare_kwok_server(self, ca: pki.CertificateAuthority) -> None:
        """kwok's server stands in for the nodes' kubelet: kube-apiserver calls it (with its
        kubelet-client certificate, checking kwok's serving certificate against the cluster's
        CA) for container logs, which kwok reads from ``pod_log_file`` (a ClusterLogs object
        for every pod, in kwok's configuration)."""
        ca.issue("kwok-kubelet", server_hosts=("127.0.0.1", "localhost")).write(self._pki, "kwok")
        ca.issue("kube-apiserver-kubelet-client", organization="system:masters").write(
            self._pki, "kubelet-client"
        )
        self.pod_log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pod_log_file.write_text(POD_LOG_TEMPLATE.read_text())
        cluster_logs = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "kfed-pod-logs"},
            "spec": {
                "selector": {},
                "logs": [{"containers": [], "logsFile": str(self.pod_log_file), "follow": True}],
            },
        }
        self._kwok_logs_config.write_text(yaml.safe_dump(cluster_logs))

    # -- processes ---------------------------------------------------------------------

    @property
    def operators_set(self) -> str:
        """The set its operators come from: ``operator_versions``, else ``versions``."""
        return self.operator_versions or self.versions

    def _binary(self, name: str) -> Path:
        return binaries.path_of(name, versions=self.versions)

    def _process(
        self, role: str, argv: list[str], env: dict[str, str] | None = None
    ) -> ManagedProcess:
        proc = ManagedProcess(
            role=role,
            argv=argv,
            log_path=self.directory / "logs" / f"{role}.log",
            tie_to_parent=self.tie_to_parent,
            env=env,
        )
        self.processes[role] = proc
        proc.start()
        return proc

    def start_etcd(self) -> None:
        p = self.ports
        self._process(
            "etcd",
            [
                str(self._binary("etcd")),
                f"--name={self.name}",
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p.etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{p.etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-cluster={self.name}=http://127.0.0.1:{p.etcd_peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def start_apiserver(self) -> None:
        d = self._pki
        self._process(
            "kube-apiserver",
            [
                str(self._binary("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports.apiserver}",
                f"--cert-dir={d}",
                f"--tls-cert-file={d / 'apiserver.crt'}",
                f"--tls-private-key-file={d / 'apiserver.key'}",
                f"--client-ca-file={d / 'ca.crt'}",
                "--authorization-mode=Node,RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer=https://127.0.0.1:{self.ports.apiserver}",
                f"--service-account-key-file={d / 'sa.crt'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                # No kube-controller-manager token controller runs, so pods must not need a
                # ServiceAccount token; no node-lifecycle controller runs to lift the not-ready
                # taint that TaintNodesByCondition puts on new nodes.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                # Aggregated APIs: the front proxy's identity, and routing to a Service's
                # endpoints directly (no kube-proxy here).
                f"--requestheader-client-ca-file={d / 'front-proxy-ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={d / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={d / 'front-proxy-client.key'}",
                "--enable-aggregator-routing=true",
                *self._kubelet_flags(),
                *self._feature_gate_flags(),
                "--v=0",
            ],
        )

    def _kubelet_flags(self) -> list[str]:
        """How kube-apiserver reaches the nodes' kubelet, kwok's server (full mode)."""
        if not self.full:
            return []
        d = self._pki
        return [
            f"--kubelet-client-certificate={d / 'kubelet-client.crt'}",
            f"--kubelet-client-key={d / 'kubelet-client.key'}",
            f"--kubelet-certificate-authority={d / 'ca.crt'}",
        ]

    def _feature_gate_flags(self) -> list[str]:
        """The same on kube-apiserver, kube-controller-manager and kube-scheduler."""
        return [dra.feature_gates_flag()] if self.dra else []

    def _controllers(self) -> str:
        # Only what Jobs, StatefulSets and Deployments need (and, with DRA, what makes pods'
        # claims from their templates), plus the aggregation of ClusterRoles (view/edit/admin
        # gather kfed's roles for people, deploy/roles). No node-lifecycle controller: kwok
        # nodes send no real heartbeats and must not be tainted or evicted.
        names = "job statefulset deployment replicaset clusterrole-aggregation garbage-collector"
        names += " namespace ttl-after-finished pod-garbage-collector"
        controllers = [f"{name}-controller" for name in names.split()]
        if self.dra:
            controllers.append(dra.CONTROLLER)
        return "--controllers=" + ",".join(controllers)

    def start_process(
        self, role: str, argv: list[str], *, env: dict[str, str] | None = None
    ) -> ManagedProcess:
        """Start one more process of this cluster (an operator, say): logged to
        logs/<role>.log, stopped by ``stop``, kept in the state like the control plane's."""
        return self._process(role, argv, env)

    def start_full_mode(self) -> None:
        kubeconfig = str(self.kubeconfig)
        self._process(
            "kube-controller-manager",
            [
                str(self._binary("kube-controller-manager")),
                f"--kubeconfig={kubeconfig}",
                self._controllers(),
                "--leader-elect=false",
                "--secure-port=0",
                "--concurrent-job-syncs=10",
                *self._feature_gate_flags(),
                "--v=0",
            ],
        )
        self._process(
            "kube-scheduler",
            [
                str(self._binary("kube-scheduler")),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                *self._feature_gate_flags(),
                "--v=0",
            ],
        )
        key, value = KWOK_NODE_ANNOTATION
        if not self.ports.kwok:
            self.ports.kwok = free_ports(1)[0]
        d = self._pki
        self._process(
            "kwok",
            [
                str(self._binary("kwok")),
                f"--kubeconfig={kubeconfig}",
                f"--config={STAGES_FILE}",
                f"--config={self._kwok_logs_config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={key}={value}",
                "--cidr=10.244.0.1/16",
                # The nodes' address and kubelet port: kwok's server on this host, where
                # kube-apiserver fetches container logs.
                "--node-ip=127.0.0.1",
                f"--node-port={self.ports.kwok}",
                f"--server-address=127.0.0.1:{self.ports.kwok}",
                f"--tls-cert-file={d / 'kwok.crt'}",
                f"--tls-private-key-file={d / 'kwok.key'}",
            ],
        )

    def stop_role(self, role: str, *, kill: bool = False) -> None:
        proc = self.processes[role]  # an unknown role is a mistake, never a silent no-op
        proc.kill() if kill else proc.stop()

    def restart_role(self, role: str) -> None:
        """Start a stopped process again with the same command line (same ports, same data)."""
        proc = self.processes[role]
        proc.stop()
        proc.start()

    def stop(self) -> None:
        # Dependants first: kwok and controllers, then the apiserver, then etcd.
        for role in reversed(list(self.processes)):
            self.processes[role].stop()

    # -- readiness ---------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self._pki / "ca.crt"))
        ctx.load_cert_chain(str(self._pki / "admin.crt"), str(self._pki / "admin.key"))
        return ctx

    def api_get(self, path: str, *, timeout: float = 5.0) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.ports.apiserver, context=self._ssl_context(), timeout=timeout
        )
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def is_ready(self) -> bool:
        try:
            status, _ = self.api_get("/readyz", timeout=2)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200

    def wait_ready(self, *, timeout: float = 90.0, exited_ok: tuple[str, ...] = ()) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.processes.values():
                if not proc.alive and proc.role not in exited_ok:
                    raise ClusterStartError(
                        f"{self.name}: {proc.role} exited (code {proc.exit_code()}); "
                        f"log {proc.log_path}:\n{proc.log_tail()}"
                    )
            if self.is_ready():
                return
            time.sleep(0.2)
        raise ClusterStartError(
            f"{self.name}: kube-apiserver not ready within {timeout:.0f}s; "
            f"log {self.processes['kube-apiserver'].log_path}"
        )

    # -- nodes -------------------------------------------------------------------------

    def node_manifests(self) -> list[dict[str, Any]]:
        return kwoknodes.node_manifests(self.name, self.nodes)

    def dra_manifests(self) -> list[dict[str, Any]]:
        """With ``dra``: the DeviceClasses and ResourceSlices of its nodes' GPUs."""
        if not self.dra:
            return []
        kubernetes = binaries.read_versions(versions=self.versions).kubernetes
        return kwoknodes.dra_manifests(self.name, self.nodes, kubernetes=kubernetes)

    def create_nodes(self) -> None:
        """The kwok nodes and, with ``dra``, their devices: one kubectl call."""
        manifests = self.node_manifests() + self.dra_manifests()
        if manifests:
            docs = {"apiVersion": "v1", "kind": "List", "items": manifests}
            self.kubectl("apply", "-f", "-", input=json.dumps(docs))

    def wait_nodes_ready(self, *, timeout: float = 60.0) -> None:
        wanted = {m["metadata"]["name"] for m in self.node_manifests()}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = self.api_get("/api/v1/nodes")
            if status == 200:
                ready = {
                    item["metadata"]["name"]
                    for item in json.loads(body)["items"]
                    if any(
                        c.get("type") == "Ready" and c.get("status") == "True"
                        for c in item.get("status", {}).get("conditions", [])
                    )
                }
                if wanted <= ready:
                    return
            time.sleep(0.2)
        raise ClusterStartError(f"{self.name}: kwok nodes not Ready within {timeout:.0f}s")

    # -- kubectl -----------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self._binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise KubectlError(result)
        return result

    def apply_objects(self, items: list[dict[str, Any]], *, field_manager: str) -> None:
        """Server-side apply of in-memory objects (one List), taking over conflicting fields."""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        self.kubectl(
            "apply", "--server-side", "--force-conflicts", f"--field-manager={field_manager}",
            "-f", "-", input=body,
        )  # fmt: skip

    # -- state -------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "directory": str(self.directory),
            "ports": asdict(self.ports),
            "full": self.full,
            "dra": self.dra,
            "versions": self.versions,
            "operator_versions": self.operator_versions,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "nodes": [n.to_state() for n in self.nodes],
            "processes": {
                role: {"pid": p.pid, "argv": p.argv, "log": str(p.log_path), "env": p.env}
                for role, p in self.processes.items()
            },
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LocalCluster:
        cluster = cls(
            name=state["name"],
            directory=Path(state["directory"]),
            ports=Ports(**state["ports"]),
            full=state["full"],
            nodes=[NodeGroup.from_state(n) for n in state["nodes"]],
            dra=state.get("dra", False),
            versions=state.get("versions", "pinned"),
            operator_versions=state.get("operator_versions"),
        )
        for role, p in state["processes"].items():
            proc = ManagedProcess(
                role=role, argv=p["argv"], log_path=Path(p["log"]), env=p.get("env")
            )
            proc.pid = p["pid"]
            cluster.processes[role] = proc
        return cluster
