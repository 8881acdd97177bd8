"""The manager's servers that start against its API server (main.py runs them): the Job
webhook and the aggregated visibility API, each started again, backing off, while the API
server cannot answer; and ``until_reachable``, the one retry of a call the API server is
not up for yet."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from manager.federation.webhooks.admission_webhook import ManagerWebhook
from manager.federation.webhooks.webhookconfig import ServiceReference
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.backoff import Backoff
from manager.kube.tasks import stop_tasks
from manager.observability.aggregated import AggregatedVisibilityServer
from manager.observability.sources import ManagerSource

log = logging.getLogger("manager")

T = TypeVar("T")


async def until_reachable(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, again and again while the API server cannot answer it (not up yet: a
    manager started before its control plane, or while that restarts), with capped,
    jittered backoff; any other error is raised at once."""
    backoff = Backoff(initial=0.5, cap=10.0)
    while True:
        try:
            return await call()
        except errors.RETRYABLE as err:
            delay = backoff.next_delay()
            log.warning("%s: %s; trying again in %.1fs", what, err, delay)
            await asyncio.sleep(delay)


def new_webhook(api: KubeApi, args: argparse.Namespace) -> ManagerWebhook:
    return ManagerWebhook(
        api,
        host=args.webhook_host,
        port=args.webhook_port,
        cert_dir=args.webhook_cert_dir,
        cert_secret=(
            (args.namespace, args.webhook_cert_secret) if args.webhook_cert_secret else None
        ),
        register_url_host=args.register_webhook_host,
        service=(
            ServiceReference(args.namespace, args.webhook_service, port=args.webhook_service_port)
            if args.webhook_service
            else None
        ),
    )


async def serve_webhook(
    api: KubeApi, args: argparse.Namespace, started: asyncio.Future[ManagerWebhook]
) -> None:
    """The Job webhook, until cancelled. Its start reads or writes the API server (the shared
    certificate, the registration): while that cannot answer, a fresh webhook is started
    again, backing off. ``started`` gets the webhook that started."""

    async def attempt() -> None:
        webhook = new_webhook(api, args)

        async def announce() -> None:
            await webhook.started.wait()
            if not started.done():
                started.set_result(webhook)

        announcing = asyncio.create_task(announce(), name="webhook/started")
        try:
            await webhook.run()
        except errors.RETRYABLE as err:
            if webhook.started.is_set():  # not seen: once started, its informers retry
                raise RuntimeError(f"the Job webhook failed: {err}") from err
            raise  # not started: until_reachable starts a fresh one
        finally:
            await stop_tasks([announcing])

    await until_reachable("the Job webhook cannot start", attempt)


async def serve_visibility(
    api: KubeApi,
    observed: ManagerSource,
    webhook_started: asyncio.Future[ManagerWebhook],
    args: argparse.Namespace,
) -> None:
    """The aggregated visibility API, once the webhook has its serving certificate. One that
    cannot start (no front proxy configured, its settings unreadable) is logged and tried
    again later, backing off; the rest of the manager runs on meanwhile."""
    webhook = await webhook_started
    backoff = Backoff(initial=5.0, cap=300.0)
    while True:
        server = AggregatedVisibilityServer(
            api,
            observed.cluster_state,
            args.visibility_host or args.webhook_host,
            args.visibility_port,
            webhook.cert_dir,
        )
        try:
            await server.start()
        except (errors.KubeError, ValueError, OSError) as err:
            delay = backoff.next_delay()
            log.error(
                "not serving the aggregated visibility API (%s); trying again in %.0fs", err, delay
            )
            await asyncio.sleep(delay)
            continue
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()
