"""The node's kubelet: its identity (a client certificate ``system:node:<name>`` in group
``system:nodes``, issued by the cluster's own CA, so the Node authorizer lets it read its
Pods' Secrets and request their ServiceAccount tokens), its configuration and command line.

Everything it writes lives under the node's directory except what the kubelet hard-codes
(/var/lib/kubelet/device-plugins, /var/log/containers symlinks): root-dir, certificates, Pod
logs, the volume plugin directory, its cgroup root. It listens on 127.0.0.1 only, with no
anonymous access, and is registered with a taint and a label so that only Pods meant for it
(deploy/*/overlays/testbed) land there, never a test's GPU Pods, and kwok leaves it alone
(kwok manages only nodes annotated kwok.x-k8s.io/node=fake).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from e2e import binaries
from e2e.local import pki
from e2e.local.pki import kubeconfig_dict

# What the testbed overlays select and tolerate.
NODE_LABEL = ("kfed.io/real-node", "true")
NODE_TAINT = {"key": "kfed.io/real-node", "value": "true", "effect": "NoSchedule"}


def node_name(cluster: str) -> str:
    return f"{cluster}-real-node"


def issue_node_certificate(pki_dir: Path, node: str) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for ``system:node:<node>``, signed by the cluster's CA
    (``pki/ca.crt`` and ``ca.key``, written by LocalCluster.prepare)."""
    ca_cert = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki_dir / 'ca.key'}: expected an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@dataclass(frozen=True, slots=True)
class Kubelet:
    directory: Path
    node: str
    server: str
    pki_dir: Path
    runtime_endpoint: str
    cgroup_root: str
    port: int
    healthz_port: int

    @property
    def config_file(self) -> Path:
        return self.directory / "config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def root_dir(self) -> Path:
        return self.directory / "root"

    @property
    def pod_logs_dir(self) -> Path:
        return self.directory / "pod-logs"

    def write_files(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        cert, key = issue_node_certificate(self.pki_dir, self.node)
        ca = (self.pki_dir / "ca.crt").read_bytes()
        kubeconfig = kubeconfig_dict(self.node, self.server, ca, pki.KeyPair(cert, key))
        self.kubeconfig.write_text(yaml.safe_dump(kubeconfig))
        self.kubeconfig.chmod(0o600)
        self.config_file.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))

    def configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": self.port,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            "readOnlyPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.pki_dir / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},  # reachable on loopback, by certificate
            "containerRuntimeEndpoint": self.runtime_endpoint,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup_root}",
            # cgroup v1 is deprecated: from kubelet 1.35 on it refuses to start there unless told.
            "failCgroupV1": False,
            "failSwapOn": False,
            # No iptables chains on a shared host (nothing here needs them: no kube-proxy).
            "makeIPTablesUtilChains": False,
            # The kernel settings are saved and restored around the node (kernel.py) instead:
            # protectKernelDefaults would refuse to start on a host whose values differ.
            "protectKernelDefaults": False,
            "podLogsDir": str(self.pod_logs_dir),
            "volumePluginDir": str(self.directory / "volume-plugins"),
            "registerWithTaints": [NODE_TAINT],
            # A shared test machine: never evict the node's Pods or delete its images because
            # another run filled the disk for a while.
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "10s",
        }  # fmt: skip

    def argv(self) -> list[str]:
        key, value = NODE_LABEL
        return [
            str(binaries.path_of("kubelet")),
            f"--config={self.config_file}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.root_dir}",
            f"--cert-dir={self.directory / 'pki'}",
            f"--hostname-override={self.node}",
            f"--node-labels={key}={value}",
            "--v=1",
        ]
