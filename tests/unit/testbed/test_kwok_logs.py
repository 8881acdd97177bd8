"""What a full local cluster prepares so that kwok serves its containers' logs: a serving
certificate for kwok's server (the nodes' kubelet endpoint) from the cluster's CA, a client
certificate for kube-apiserver, the log itself and the ClusterLogs object naming it; and the
ports handed out, never twice."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from e2e.local.cluster import POD_LOG_TEMPLATE, LocalCluster
from e2e.local.ports import Ports, free_ports


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_a_full_cluster_prepares_kwoks_log_server(tmp_path: Path) -> None:
    cluster = LocalCluster("worker-1", tmp_path, Ports(1, 2, 3), full=True)
    cluster.prepare()
    pki = tmp_path / "pki"
    ca, serving, client = (_cert(pki / f"{n}.crt") for n in ("ca", "kwok", "kubelet-client"))
    for cert in (serving, client):
        cert.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage

    assert cluster.pod_log_file.read_text() == POD_LOG_TEMPLATE.read_text()
    logs = yaml.safe_load((tmp_path / "kwok" / "logs.yaml").read_text())
    assert logs["kind"] == "ClusterLogs" and logs["spec"]["selector"] == {}, "every pod"
    assert logs["spec"]["logs"] == [
        {"containers": [], "logsFile": str(cluster.pod_log_file), "follow": True}
    ]


def test_the_log_is_in_cri_format() -> None:
    for line in POD_LOG_TEMPLATE.read_text().splitlines():
        when, stream, tag, text = line.split(" ", 3)
        assert when.endswith("Z") and stream in ("stdout", "stderr") and tag == "F" and text


def test_a_lite_cluster_prepares_no_kwok(tmp_path: Path) -> None:
    cluster = LocalCluster("manager", tmp_path, Ports(1, 2, 3))
    cluster.prepare()
    assert not (tmp_path / "pki" / "kwok.crt").exists()
    assert not cluster.pod_log_file.exists()


def test_ports_are_never_handed_out_twice() -> None:
    first = free_ports(20)
    second = free_ports(20)
    assert len(set(first)) == 20 and not set(first) & set(second)
