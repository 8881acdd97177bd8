"""Upstream Kueue (``cmd/kueue``, built by ``build-kueue.sh``) as one more process of a local
cluster: the interop bed's worker that runs upstream Kueue instead of kfed's shim, and the
MultiKueue manager of a kfed worker.

It runs as upstream's own manifests run it, less what a bare control plane lacks: leader
election off; its own certificate management off (it would mint a certificate for a Service
name, and there is no kube-proxy), so its webhooks are served with a certificate of our CA and
registered by URL; only the webhooks of what it serves here (batch/v1 Jobs and its own kinds;
the others would fail closed on Pods and Deployments it does not watch); the visibility server
off. Its CRDs are upstream's, from the module copy beside the binary, never kfed's.

One fixed path remains: with its certificate management off, cmd/kueue reads its metrics
certificate from ``/etc/kueue/metrics/certs`` and exits when it is missing. We write one there
when there is none (root is needed; `UpstreamKueueUnavailable` says so otherwise) and never
replace one that exists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e import binaries
from e2e.local import operators as ops
from e2e.local import pki
from e2e.local.cluster import LocalCluster
from e2e.local.errors import ClusterStartError
from e2e.local.ports import free_ports
from e2e.waiting import wait_for_sync

ROLE = "kueue"
HOST = "127.0.0.1"
NAMESPACE = "kueue-system"
FIELD_MANAGER = "kfed-interop"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
# The API groups whose webhooks this Kueue serves here: batch/v1 Jobs, the only integration
# it is configured with, and its own kinds.
SERVED_GROUPS = frozenset({"batch", "kueue.x-k8s.io"})
# What proves its webhooks serve: a server-side dry run passes its ResourceFlavor defaulting
# and validation, and nothing is stored.
_PROBE_FLAVOR: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "kfed-webhook-probe"},
}


class UpstreamKueueUnavailable(RuntimeError):
    """Upstream Kueue cannot run on this machine; the message says exactly why."""


def source() -> Path:
    """The released module beside the binary (BinariesMissing when it is not built)."""
    return binaries.kueue_dir("kueue") / "src"


def binary() -> Path:
    return binaries.kueue_dir("kueue") / "kueue"


def crd_directory() -> Path:
    return source() / "config" / "components" / "crd" / "bases"


def install_crds(cluster: LocalCluster) -> None:
    """Upstream's own CRDs (every kind, v1beta1 and v1beta2 served, v1beta2 stored)."""
    ops.apply_crd_directories(cluster, [crd_directory()], field_manager=FIELD_MANAGER)


def webhook_configurations(manifests: str, *, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Upstream's webhook manifests registered by URL, keeping only the webhooks whose every
    rule is in ``SERVED_GROUPS``; configurations left empty are dropped."""
    kept = []
    for config in ops.webhook_configurations(manifests, prefix=ROLE, port=port, ca_pem=ca_pem):
        config["webhooks"] = [
            hook
            for hook in config["webhooks"]
            if all(set(rule.get("apiGroups", [])) <= SERVED_GROUPS for rule in hook["rules"])
        ]
        if config["webhooks"]:
            kept.append(config)
    return kept


def ensure_metrics_certificate(ca: pki.CertificateAuthority) -> None:
    """A certificate at the one path cmd/kueue reads it from (see the module's docstring)."""
    if (METRICS_CERTS / "tls.crt").exists() and (METRICS_CERTS / "tls.key").exists():
        return
    try:
        METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        ca.issue("kueue-metrics", server_hosts=(HOST,)).write(METRICS_CERTS, "tls")
    except OSError as err:
        raise UpstreamKueueUnavailable(
            f"upstream Kueue {binaries.kueue_version()} reads its metrics certificate from "
            f"{METRICS_CERTS} when its own certificate management is off, and this user cannot "
            f"write it there ({err}); run as root, or create tls.crt and tls.key there once"
        ) from err


@dataclass
class UpstreamKueue:
    """One cmd/kueue process of ``cluster``. ``origin`` and ``worker_lost_timeout`` are its
    MultiKueue settings (they matter when it is a manager); ``gc_interval`` its remote
    garbage collection period."""

    cluster: LocalCluster
    origin: str = "multikueue"
    worker_lost_timeout: str = "15m"
    gc_interval: str = "1m"
    health_port: int = 0
    webhook_names: list[str] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        return self.cluster.directory / ROLE

    def configuration(self, *, health: int, metrics: int, webhook: int) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "manageJobsWithoutQueueName": False,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "health": {"healthProbeBindAddress": f"{HOST}:{health}"},
            "metrics": {"bindAddress": f"{HOST}:{metrics}"},
            "webhook": {"port": webhook, "host": HOST, "certDir": str(self.directory / "certs")},
            "integrations": {"frameworks": ["batch/job"]},
            "multiKueue": {
                "origin": self.origin,
                "workerLostTimeout": self.worker_lost_timeout,
                "gcInterval": self.gc_interval,
            },
        }

    def start(self) -> None:
        """Write its certificates and configuration, register its webhooks (fail closed, as
        upstream's: until it serves, its kinds cannot be written; ``wait_ready`` waits for
        that) and start it, from the calling thread (the process dies with it)."""
        ca = pki.CertificateAuthority(f"kfed-{self.cluster.name}-kueue-ca")
        ensure_metrics_certificate(ca)
        (self.directory / "certs").mkdir(parents=True, exist_ok=True)
        ca.issue("kueue-webhooks", server_hosts=(HOST,)).write(self.directory / "certs", "tls")
        health, metrics, webhook = free_ports(3)
        self.health_port = health
        config = self.directory / "config.yaml"
        config.write_text(
            yaml.safe_dump(self.configuration(health=health, metrics=metrics, webhook=webhook))
        )
        manifests = source() / "config" / "components" / "webhook" / "manifests.yaml"
        hooks = webhook_configurations(manifests.read_text(), port=webhook, ca_pem=ca.pair.cert_pem)
        self.webhook_names = [
            f"{h['kind'].lower().removesuffix('configuration')}configuration/{h['metadata']['name']}"
            for h in hooks
        ]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        self.cluster.apply_objects([namespace, *hooks], field_manager=FIELD_MANAGER)
        self.cluster.start_process(
            ROLE,
            [
                str(binary()),
                f"--kubeconfig={self.cluster.kubeconfig}",
                f"--config={config}",
                # Its pending-workloads API would need an APIService and its own certificates.
                "--feature-gates=VisibilityOnDemand=false",
                "--zap-encoder=console",
            ],
        )

    def _alive_or_raise(self) -> None:
        proc = self.cluster.processes[ROLE]
        if not proc.alive:
            raise ClusterStartError(
                f"{self.cluster.name}: upstream Kueue exited (code {proc.exit_code()}); "
                f"log {proc.log_path}:\n{proc.log_tail()}"
            )

    def _ready(self) -> bool:
        self._alive_or_raise()
        return ops.ready(self.health_port)

    def _webhooks_serve(self) -> bool:
        self._alive_or_raise()
        probe = json.dumps(_PROBE_FLAVOR)
        result = self.cluster.kubectl(
            "create", "--dry-run=server", "-f", "-", input=probe, check=False
        )
        return result.returncode == 0

    def wait_ready(self, *, timeout: float = 120.0) -> None:
        """Until its /readyz answers 200 and its webhooks serve."""
        what = f"{self.cluster.name}: upstream Kueue"
        wait_for_sync(self._ready, timeout=timeout, interval=0.2, what=f"{what} /readyz")
        wait_for_sync(
            self._webhooks_serve, timeout=timeout, interval=0.3, what=f"{what} webhooks serving"
        )

    def stop(self) -> None:
        """Stop it and unregister its webhooks (they fail closed: left behind, they would
        block every Job and Kueue object of the cluster)."""
        if ROLE in self.cluster.processes:
            self.cluster.stop_role(ROLE)
        if self.webhook_names:
            self.cluster.kubectl("delete", "--ignore-not-found", *self.webhook_names)
            self.webhook_names = []


def start(cluster: LocalCluster, **settings: Any) -> UpstreamKueue:
    """Start upstream Kueue on ``cluster`` (its CRDs installed first, see install_crds);
    returns at once: call ``wait_ready`` on the result."""
    running = UpstreamKueue(cluster, **settings)
    running.start()
    return running
