"""The API client's rate-limit flags, shared by the manager and the worker shim: Kueue's
``clientConnection`` (``qps``, ``burst``) as flags (the configuration file's keys map to them).

kfed's default is no client-side limit, where Kueue's is 50 requests/s after a burst of 100:
kfed's writes are already bounded where they fan out (admission writes, pending reasons,
copies per worker each have their own concurrency), and a limit on the whole client makes a
busy manager queue its lease renewals behind routine writes. Set one to share an API server
politely with other controllers (docs/sizing.md).
"""

from __future__ import annotations

import argparse

from manager.kube.api import KubeApi

DEFAULT_BURST = 100


def add_client_connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=0.0,
        metavar="QPS",
        help="requests per second to the API server after a burst (Kueue's "
        "clientConnection.qps); 0 or below: no limit (the default)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=DEFAULT_BURST,
        metavar="N",
        help=f"requests at once before --kube-api-qps paces them (Kueue's "
        f"clientConnection.burst; default {DEFAULT_BURST})",
    )


def client_connection_problem(args: argparse.Namespace) -> str | None:
    if args.kube_api_qps > 0 and args.kube_api_burst < 1:
        return f"--kube-api-burst must be at least 1 with --kube-api-qps, got {args.kube_api_burst}"
    return None


def apply_client_connection(api: KubeApi, args: argparse.Namespace) -> None:
    api.limit_rate(args.kube_api_qps, args.kube_api_burst)
