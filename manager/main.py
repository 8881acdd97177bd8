"""The kfed manager process: global queues on the manager cluster, workers registered by
MultiKueueCluster, capacity-aware dispatch, status sync and fenced failover.

Several replicas may run: they elect a leader on a Lease in ``--namespace``; only the
leader acts. A replica that loses leadership (its API server away for longer than the
renew deadline, say) stops everything the leader does, stands by, and leads again when it
wins the Lease back. SIGTERM stops it cleanly and hands leadership over at once.

The servers that start against the API server (the Job webhook, the aggregated visibility
API) are serving.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
from pathlib import Path

from manager import configfile
from manager.api import knobs
from manager.controllers.flags import add_controller_flags, controller_settings_from
from manager.controllers.jobkinds import external as external_kinds
from manager.federation.runtime import FederationController
from manager.federation.settings import FederationSettings, duration
from manager.federation.webhooks.admission_webhook import ManagerWebhook
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, running_in_cluster
from manager.kube.clientflags import (
    add_client_connection_flags,
    apply_client_connection,
    client_connection_problem,
)
from manager.kube.leader import LeaderElectionConfig, LeaderElector
from manager.observability.entrypoint import run_process
from manager.observability.secureflags import (
    add_secure_serving_flags,
    secure_serving_from,
    secure_serving_problem,
)
from manager.observability.server import ObservabilityServer
from manager.observability.sources import ManagerSource
from manager.serving import serve_visibility, serve_webhook, until_reachable
from manager.telemetry.metrics import Metrics

log = logging.getLogger("manager")


def default_listen_host() -> str:
    """Where a server of this process listens unless told: every interface in a Pod (the
    kube-apiserver, the kubelet and Prometheus reach it by the Pod's IP, and deploy/'s
    NetworkPolicy decides who may), loopback anywhere else, so that a manager run by hand
    exposes nothing. In a Pod is what the kubelet says: KUBERNETES_SERVICE_HOST is set."""
    return "0.0.0.0" if running_in_cluster() else "127.0.0.1"


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() in {"localhost", "localhost."}


def _default_webhook_host(args: argparse.Namespace) -> str | None:
    """Give --webhook-host (and so --visibility-host) its default; a usage error when that
    default could not be reached where --register-webhook-host tells kube-apiserver to dial
    (the webhook fails closed: no queued Job could be created)."""
    if args.webhook_host is not None:
        return None
    args.webhook_host = default_listen_host()
    register = args.register_webhook_host
    if register and _is_loopback(args.webhook_host) and not _is_loopback(register):
        return (
            f"--register-webhook-host {register} is not a loopback address, but outside a "
            f"Pod the webhook listens on {args.webhook_host} unless told: pass "
            "--webhook-host with an address kube-apiserver reaches (0.0.0.0: every "
            "interface; docs/security.md)"
        )
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m manager", description=__doc__)
    p.add_argument(
        "--kubeconfig", help="kubeconfig of the manager cluster (default: the Pod's ServiceAccount)"
    )
    p.add_argument("--context")
    p.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}")
    knobs.add_flags(p, FederationSettings)
    leader = LeaderElectionConfig(namespace="", name="", identity="")  # the defaults, once
    p.add_argument("--leader-lease-duration", type=duration, default=leader.lease_duration)
    p.add_argument("--leader-renew-deadline", type=duration, default=leader.renew_deadline)
    p.add_argument("--leader-retry-period", type=duration, default=leader.retry_period)
    add_controller_flags(p)
    add_client_connection_flags(p)
    p.add_argument("--no-webhook", action="store_true", help="do not serve the Job webhook")
    p.add_argument(
        "--webhook-host",
        help="address the Job webhook listens on (default: 0.0.0.0 in a Pod, where "
        "kube-apiserver dials the Pod's IP; 127.0.0.1 elsewhere: docs/security.md)",
    )
    p.add_argument("--webhook-port", type=int, default=9443)
    cert = p.add_mutually_exclusive_group()
    cert.add_argument(
        "--webhook-cert-dir",
        type=Path,
        help="tls.crt/tls.key (and ca.crt) to serve with, e.g. a mounted cert-manager Secret; "
        "reloaded when they change. Default: generated for this process",
    )
    cert.add_argument(
        "--webhook-cert-secret",
        metavar="NAME",
        help="share one generated serving certificate between replicas through this "
        "kubernetes.io/tls Secret in --namespace (created by the first replica)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--register-webhook-host",
        help="register the webhook by URL at this host (out-of-cluster managers, local test "
        "bed); outside a Pod, one that is not loopback needs --webhook-host too",
    )
    where.add_argument(
        "--webhook-service",
        metavar="NAME",
        help="register the webhook by reference to this Service in --namespace (in-cluster)",
    )
    p.add_argument("--webhook-service-port", type=int, default=443)
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address of /healthz, /readyz, /metrics, /dashboard and the visibility API: "
        "loopback unless set (0.0.0.0 exposes them: deploy/ does, behind a NetworkPolicy, "
        "and with --metrics-secure behind a token too; docs/security.md)",
    )
    p.add_argument(
        "--metrics-port", type=int, default=8080, help="their port; 0: any free port (logged)"
    )
    add_secure_serving_flags(p)
    p.add_argument(
        "--visibility-host",
        help="address of the aggregated visibility API (default: --webhook-host's, so "
        "0.0.0.0 in a Pod and 127.0.0.1 elsewhere)",
    )
    p.add_argument(
        "--visibility-port",
        type=int,
        default=0,
        help="serve Kueue's visibility API to kube-apiserver's aggregation (the APIServices "
        "of deploy/manager) on this port, over TLS with the webhook's certificate, front-proxy "
        "client certificates required, callers authorized by SubjectAccessReview; 0: not",
    )
    p.add_argument(
        "--trace-url",
        default="",
        metavar="URL",
        help="a trace UI's page of one trace, {trace_id} standing for its id (e.g. "
        "http://jaeger.example:16686/trace/{trace_id}): workload pages link to their trace",
    )
    p.add_argument("--log-level", default="INFO")
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="text (for people) or json (one object per line, upstream Kueue's keys: level, "
        "ts, logger, msg, workload, clusterQueue, job, cluster, traceID)",
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a configuration file: Kueue's Configuration where the meaning is the same "
        "(namespace, clientConnection, leaderElection, integrations, multiKueue, "
        "resources.deviceClassMappings, fairSharing) and kfed's own settings under `kfed:` "
        "by their flag names in camelCase; flags win (docs/install.md)",
    )
    config_warnings = _apply_config_file(p, argv)
    args = p.parse_args(argv)
    args.config_warnings = config_warnings
    if args.kubeconfig is None and not running_in_cluster():
        p.error("--kubeconfig is required outside a Pod (KUBERNETES_SERVICE_HOST is not set)")
    if problem := _default_webhook_host(args):
        p.error(problem)
    if problem := secure_serving_problem(args) or client_connection_problem(args):
        p.error(problem)
    try:
        args.controller_settings = controller_settings_from(args, role="manager")
        external_kinds.check_federated(args.external_frameworks)
    except ValueError as err:
        p.error(str(err))
    return args


def _apply_config_file(p: argparse.ArgumentParser, argv: list[str] | None) -> list[str]:
    """Make the ``--config`` file's settings the parser's defaults (each read as its flag reads
    its text, so a wrong value is a usage error naming its key), and return its warnings."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", type=Path)
    known, _ = pre.parse_known_args(argv)
    if known.config is None:
        return []
    try:
        loaded = configfile.defaults_from(known.config.read_text(), p)
    except (OSError, configfile.ConfigError) as err:
        p.error(f"--config {known.config}: {err}")
    p.set_defaults(**loaded.defaults)
    return [f"--config {known.config}: {w}" for w in loaded.warnings]


def settings_from(args: argparse.Namespace) -> FederationSettings:
    return knobs.from_flags(FederationSettings, args, manager_identity=args.identity)


async def run(args: argparse.Namespace) -> None:
    """Until SIGTERM: leads whenever this replica holds the leader Lease and stands by
    otherwise. Its API server away (at start-up, or long enough to lose the Lease) never
    ends the process: it waits, backing off, and leads again once it can."""
    for warning in getattr(args, "config_warnings", []):
        log.warning("%s", warning)
    async with await KubeApi.connect(args.kubeconfig, context=args.context, name="manager") as api:
        apply_client_connection(api, args)
        elector = LeaderElector(
            api,
            LeaderElectionConfig(
                namespace=args.namespace,
                name="kfed-manager-leader",
                identity=args.identity,
                lease_duration=args.leader_lease_duration,
                renew_deadline=args.leader_renew_deadline,
                retry_period=args.leader_retry_period,
            ),
        )

        observed = ManagerSource(
            Metrics.for_process(), identity=args.identity, elector=elector, trace_url=args.trace_url
        )
        server = ObservabilityServer(
            observed,
            args.metrics_host,
            args.metrics_port,
            secure=secure_serving_from(args, api),
        )
        await server.start()  # first: a port already taken ends the process at once

        async def ensure_namespace() -> None:
            # Forbidden: deployed with a Role in its (existing) namespace only.
            with contextlib.suppress(errors.AlreadyExists, errors.Forbidden):
                await api.create(R.NAMESPACES, {"metadata": {"name": args.namespace}})

        async def lead() -> None:
            # A fresh federation each term: nothing of a lost term's acts again.
            first = elector.terms <= 1
            log.info(
                "%s leads: starting the federation%s", args.identity, "" if first else " again"
            )
            federation = FederationController(
                api,
                settings_from(args),
                args.controller_settings,
                metrics=observed.metrics,
            )
            observed.federation = federation
            try:
                await federation.run()
            finally:
                if observed.federation is federation:
                    observed.federation = None

        async def elect() -> None:
            await until_reachable(f"namespace {args.namespace}", ensure_namespace)
            await elector.run(lead)

        parts = [elect(), server.run()]
        if not args.no_webhook:
            webhook_started: asyncio.Future[ManagerWebhook] = (
                asyncio.get_running_loop().create_future()
            )
            parts.append(serve_webhook(api, args, webhook_started))
            if args.visibility_port:
                parts.append(serve_visibility(api, observed, webhook_started, args))
        tasks = [asyncio.ensure_future(p) for p in parts]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Also on SIGTERM: stop every part (the elector releases its Lease) while the
            # API client is still open.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()  # a fatal error (e.g. the webhook's port taken) ends the process
        raise RuntimeError("a part of the manager ended on its own")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_process(
        run(args),
        service_name="kfed-manager",
        display_name="kfed manager",
        log_level=args.log_level,
        log_format=args.log_format,
    )
