"""``--metrics-secure`` and ``--metrics-cert-dir``, the same for the manager and the worker
shim, and the ``SecureServing`` they ask for (server.py)."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from manager.kube.api import KubeApi
from manager.observability.access import DelegatedAccess
from manager.observability.server import SecureServing
from manager.observability.servingtls import ServingTLS, load_cert_dir


def add_secure_serving_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-secure",
        action="store_true",
        help="serve the observability port over TLS, every path but /healthz and /readyz "
        "behind a bearer token that kube-apiserver authenticates (TokenReview) and authorizes "
        "(SubjectAccessReview: get on /metrics, ClusterRole kfed-metrics-reader), as "
        "upstream Kueue serves its metrics (docs/metrics.md)",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        type=Path,
        metavar="DIR",
        help="with --metrics-secure: tls.crt and tls.key to serve with (e.g. a mounted "
        "kubernetes.io/tls Secret), reloaded when they change; default: a self-signed "
        "certificate generated at start",
    )


def secure_serving_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the two flags (a usage error), or None."""
    cert_dir: Path | None = args.metrics_cert_dir
    if cert_dir is None:
        return None
    if not args.metrics_secure:
        return "--metrics-cert-dir needs --metrics-secure (plain HTTP serves no certificate)"
    try:
        load_cert_dir(cert_dir)
    except ValueError as err:
        return f"--metrics-cert-dir: {err}"
    return None


def serving_hosts(host: str) -> list[str]:
    """Names a generated certificate carries: loopback, this host's name, the listening
    address when it is one (scrapers of a generated certificate skip verification anyway)."""
    hosts = {"localhost", "127.0.0.1", socket.gethostname()}
    if host not in ("", "0.0.0.0", "::"):
        hosts.add(host)
    return sorted(hosts)


def secure_serving_from(args: argparse.Namespace, api: KubeApi) -> SecureServing | None:
    """What ``--metrics-secure`` asks for (None without it); the reviews are made with
    ``api``, the process's own credentials."""
    if not args.metrics_secure:
        return None
    cert_dir: Path | None = args.metrics_cert_dir
    tls = (
        ServingTLS.from_cert_dir(cert_dir)
        if cert_dir is not None
        else ServingTLS.self_signed(serving_hosts(args.metrics_host))
    )
    return SecureServing(tls=tls, access=DelegatedAccess(api))
