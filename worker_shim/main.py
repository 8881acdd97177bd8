"""The worker shim: the same admission core and controllers as the manager, on one cluster.

It admits Workloads under the cluster's own ClusterQueues and runs their Jobs on its nodes.
A Workload copied here by a kfed manager is admitted like any other; the manager only places
it, and its copy of the Job names the Workload to use.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube.api import KubeApi
from manager.kube.process import configure_logging, run_until_signalled
from worker_shim.fencing import Fencing, FencingSettings

log = logging.getLogger("worker_shim")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m worker_shim", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the cluster to run on")
    parser.add_argument("--context", help="kubeconfig context (default: current)")
    parser.add_argument(
        "--workers", type=int, default=4, help="concurrent reconciles per controller"
    )
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
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    async with await KubeApi.from_kubeconfig_file(
        args.kubeconfig, context=args.context, name="local"
    ) as api:
        controller = ClusterController(api, ControllerSettings(workers=args.workers))
        log.info(
            "worker shim starting on %s (fencing %s)",
            args.kubeconfig,
            "off" if args.no_fencing else "on",
        )
        parts = [controller.run()]
        if not args.no_fencing:
            parts.append(
                Fencing(api, controller.state, FencingSettings(namespace=args.namespace)).run()
            )
        try:
            await asyncio.gather(*parts)
        finally:
            log.info("worker shim stopped")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    asyncio.run(run_until_signalled(run(args)))
    return 0
