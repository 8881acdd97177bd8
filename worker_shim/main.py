"""The worker shim: the same admission core and controllers as the manager, on one cluster.

It admits Workloads under the cluster's own ClusterQueues and runs their Jobs on its nodes.
A Workload copied here by a kfed manager is admitted like any other; the manager only places
it, and its copy of the Job names the Workload to use. And it fences: when a manager's Lease
here lapses, that manager's copies are stopped (fencing.py).

Several replicas may run: they elect a leader on Lease ``kfed-worker-shim-leader`` in
``--namespace``; only the leader admits, every replica fences (so fencing never waits for a
new leader). ``--mode fence-only`` is for a worker where upstream Kueue admits: it admits
nothing and only fences, by deactivating the copies as a person would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket

from manager.controllers.flags import add_controller_flags, controller_settings_from
from manager.controllers.runtime import ClusterController
from manager.federation.settings import duration
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, running_in_cluster
from manager.kube.backoff import Backoff
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
from manager.observability.sources import ShimSource
from manager.telemetry.metrics import Metrics
from worker_shim.copies import ManagerCopies
from worker_shim.fencing import Fencing, FencingSettings, ShimMode
from worker_shim.topologyreport import TopologyReport

log = logging.getLogger("worker_shim")

LEADER_LEASE = "kfed-worker-shim-leader"
COMPONENT = "kfed-worker-shim"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m worker_shim", description=__doc__)
    parser.add_argument(
        "--kubeconfig", help="kubeconfig of the cluster to run on (default: the Pod's account)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: current)")
    add_controller_flags(parser)
    parser.add_argument(
        "--namespace",
        default="kueue-system",
        help="where the managers' fencing Leases and the shim's heartbeat live",
    )
    parser.add_argument(
        "--no-fencing",
        action="store_true",
        help="do not fence (behave like a worker without kfed's shim, e.g. upstream Kueue)",
    )
    parser.add_argument(
        "--mode",
        type=ShimMode,
        choices=list(ShimMode),
        default=ShimMode.ADMIT,
        help="admit: admit workloads here and fence; fence-only: a worker where upstream "
        "Kueue admits: admit nothing, only fence the managers' copies (deactivate them, so "
        "Kueue stops them) when a manager's Lease lapses (docs/interop.md)",
    )
    parser.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="this replica's name in the Leases it writes (default: host name and pid; in a "
        "Pod the host name is the Pod's name)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"run for Lease {LEADER_LEASE} in --namespace; only its holder admits, so "
        "several replicas may run (every one fences). --no-leader-elect: admit at once, "
        "one replica only",
    )
    leader = LeaderElectionConfig(namespace="", name="", identity="")  # the defaults, once
    parser.add_argument("--leader-lease-duration", type=duration, default=leader.lease_duration)
    parser.add_argument("--leader-renew-deadline", type=duration, default=leader.renew_deadline)
    parser.add_argument("--leader-retry-period", type=duration, default=leader.retry_period)
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address of /healthz, /readyz, /metrics, /dashboard and the visibility API: "
        "loopback unless set (0.0.0.0 exposes them: deploy/ does, behind a NetworkPolicy, "
        "and with --metrics-secure behind a token too; docs/security.md)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8081,
        help="their port (the manager's default is 8080; give each further shim on one host "
        "its own); 0: any free port (logged)",
    )
    add_secure_serving_flags(parser)
    add_client_connection_flags(parser)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="text (for people) or json (one object per line, upstream Kueue's keys: level, "
        "ts, logger, msg, workload, clusterQueue, job, cluster, traceID)",
    )
    args = parser.parse_args(argv)
    if args.kubeconfig is None and not running_in_cluster():
        parser.error("--kubeconfig is required outside a Pod (KUBERNETES_SERVICE_HOST is not set)")
    if problem := secure_serving_problem(args) or client_connection_problem(args):
        parser.error(problem)
    if args.mode is ShimMode.FENCE_ONLY and args.no_fencing:
        parser.error("--mode fence-only with --no-fencing would do nothing: drop one")
    try:
        args.controller_settings = controller_settings_from(args, role="worker")
        args.leader_election = LeaderElectionConfig(
            namespace=args.namespace,
            name=LEADER_LEASE,
            identity=args.identity,
            lease_duration=args.leader_lease_duration,
            renew_deadline=args.leader_renew_deadline,
            retry_period=args.leader_retry_period,
        )
    except ValueError as err:
        parser.error(str(err))
    return args


async def ensure_namespace(api: KubeApi, namespace: str) -> None:
    """Create ``namespace`` (the fencing Leases' and the heartbeat's), trying again while the
    API server cannot answer (not up yet: a shim started before its control plane), with
    capped, jittered backoff. Forbidden: deployed with a Role in its existing namespace."""
    backoff = Backoff(initial=0.5, cap=10.0)
    while True:
        try:
            with contextlib.suppress(errors.AlreadyExists, errors.Forbidden):
                await api.create(R.NAMESPACES, {"metadata": {"name": namespace}})
            return
        except errors.RETRYABLE as err:
            delay = backoff.next_delay()
            log.warning("namespace %s: %s; trying again in %.1fs", namespace, err, delay)
            await asyncio.sleep(delay)


async def fence(api: KubeApi, args: argparse.Namespace, metrics: Metrics) -> None:
    """Fence until cancelled, whether this replica leads or not (fencing.py says why that is
    safe), following only the managers' copies (copies.py)."""
    copies = ManagerCopies(api, metrics=metrics, component=COMPONENT)
    settings = FencingSettings(namespace=args.namespace, identity=args.identity, mode=args.mode)

    async def fence_once_the_namespace_exists() -> None:
        # Before, a namespace that could not be created at start-up (API server down) stayed
        # missing: no heartbeat was ever written, and the manager saw a shim that cannot fence.
        await ensure_namespace(api, args.namespace)
        await Fencing(api, copies, settings).run()

    # The copies are followed (and their informers retry) from the start, API server or not.
    await asyncio.gather(copies.run(), fence_once_the_namespace_exists())


async def admit(api: KubeApi, args: argparse.Namespace, source: ShimSource) -> None:
    """The admitting controllers, until cancelled; a fresh one each term, so nothing of a
    lost term acts again."""
    controller = ClusterController(api, args.controller_settings, metrics=source.metrics)
    source.controller = controller
    running = [controller.run()]
    if args.controller_settings.topology_aware:
        # The managers place TAS workloads by what this reports (docs/tas.md).
        running.append(TopologyReport(api, controller.state, args.namespace).run())
    try:
        await asyncio.gather(*running)
    finally:
        if source.controller is controller:
            source.controller = None


async def admit_when_leading(
    api: KubeApi, args: argparse.Namespace, source: ShimSource, elector: LeaderElector
) -> None:
    await ensure_namespace(api, args.namespace)
    await elector.run(lambda: admit(api, args, source))


async def run(args: argparse.Namespace) -> None:
    """Until SIGTERM. Its API server away (at start-up or later) never ends the process:
    the informers, the heartbeat, the election and the namespace above retry, backing off."""
    async with await KubeApi.connect(args.kubeconfig, context=args.context, name="local") as api:
        apply_client_connection(api, args)
        admitting = args.mode is ShimMode.ADMIT
        elector = (
            LeaderElector(api, args.leader_election) if admitting and args.leader_elect else None
        )
        source = ShimSource(
            None,
            identity=args.identity,
            metrics=Metrics.for_process(),
            elector=elector,
            fence_only=not admitting,
        )
        server = ObservabilityServer(
            source, args.metrics_host, args.metrics_port, secure=secure_serving_from(args, api)
        )
        await server.start()  # first: a port already taken ends the process at once
        log.info(
            "worker shim %s starting on %s (mode %s, fencing %s, leader election %s)",
            args.identity,
            args.kubeconfig or "its own cluster (in-cluster)",
            args.mode.value,
            "off" if args.no_fencing else "on",
            "on" if elector is not None else "off",
        )
        parts = [server.run()]
        if elector is not None:
            parts.append(admit_when_leading(api, args, source, elector))
        elif admitting:
            parts.append(admit(api, args, source))
        if not args.no_fencing:
            parts.append(fence(api, args, source.metrics))
        try:
            await asyncio.gather(*parts)
        finally:
            log.info("worker shim stopped")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_process(
        run(args),
        service_name="kfed-worker-shim",
        display_name="kfed worker shim",
        log_level=args.log_level,
        log_format=args.log_format,
    )
