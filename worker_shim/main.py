"""The worker shim: the same admission core and controllers as the manager, on one cluster.

It admits Workloads under the cluster's own ClusterQueues and runs their Jobs on its nodes.
A Workload copied here by a kfed manager is admitted like any other; the manager only places
it, and its copy of the Job names the Workload to use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

from manager.controllers.flags import add_controller_flags, controller_settings_from
from manager.controllers.runtime import ClusterController
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, running_in_cluster
from manager.kube.backoff import Backoff
from manager.observability.entrypoint import run_process
from manager.observability.secureflags import (
    add_secure_serving_flags,
    secure_serving_from,
    secure_serving_problem,
)
from manager.observability.server import ObservabilityServer
from manager.observability.sources import ShimSource
from manager.telemetry.metrics import Metrics
from worker_shim.fencing import Fencing, FencingSettings

log = logging.getLogger("worker_shim")


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
    if problem := secure_serving_problem(args):
        parser.error(problem)
    try:
        args.controller_settings = controller_settings_from(args, role="worker")
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


async def fence(api: KubeApi, controller: ClusterController, namespace: str) -> None:
    # Before, a namespace that could not be created at start-up (API server down) stayed
    # missing: no heartbeat was ever written, and the manager saw a shim that cannot fence.
    await ensure_namespace(api, namespace)
    await Fencing(api, controller.state, FencingSettings(namespace=namespace)).run()


async def run(args: argparse.Namespace) -> None:
    """Until SIGTERM. Its API server away (at start-up or later) never ends the process:
    the informers, the heartbeat and the namespace above retry, backing off."""
    async with await KubeApi.connect(args.kubeconfig, context=args.context, name="local") as api:
        controller = ClusterController(
            api,
            args.controller_settings,
            metrics=Metrics.for_process(),
        )
        server = ObservabilityServer(
            ShimSource(controller),
            args.metrics_host,
            args.metrics_port,
            secure=secure_serving_from(args, api),
        )
        await server.start()  # first: a port already taken ends the process at once
        log.info(
            "worker shim starting on %s (fencing %s)",
            args.kubeconfig or "its own cluster (in-cluster)",
            "off" if args.no_fencing else "on",
        )
        parts = [controller.run(), server.run()]
        if not args.no_fencing:
            parts.append(fence(api, controller, args.namespace))
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
