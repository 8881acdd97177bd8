"""Runs the Job webhook next to the manager: its own light informers (LocalQueues,
ClusterQueues, AdmissionChecks), so every replica answers, leader or not; the serving
certificate (generated when none is given); and, optionally, the registration of the
MutatingWebhookConfiguration (the local test bed and out-of-cluster managers use a URL)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from pathlib import Path

from manager.controllers.state import ClusterState
from manager.federation import certs, webhookconfig
from manager.federation.webhook import MUTATE_JOB_PATH, ClusterStateQueues, WebhookServer
from manager.kube.api import KubeApi

log = logging.getLogger(__name__)


class ManagerWebhook:
    def __init__(
        self,
        api: KubeApi,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cert_dir: Path | None = None,
        register_url_host: str | None = None,
        configuration_name: str = "kfed-manager",
    ) -> None:
        self.api = api
        self.state = ClusterState(api)
        self.lookup = ClusterStateQueues(self.state)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if cert_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kfed-webhook-")
            cert_dir = Path(self._tmp.name)
        self.cert_dir = cert_dir
        self.ca_bundle: bytes | None = None
        if not (cert_dir / certs.CERT_FILE).exists():
            hosts = [h for h in {host, "127.0.0.1", "localhost"} if h not in ("0.0.0.0", "")]
            self.ca_bundle = certs.write_serving_certificate(cert_dir, hosts)
        elif (cert_dir / certs.CA_FILE).exists():
            self.ca_bundle = (cert_dir / certs.CA_FILE).read_bytes()
        self.server = WebhookServer(self.lookup, host, port, cert_dir)
        self.register_url_host = register_url_host
        self.configuration_name = configuration_name
        self.started = asyncio.Event()

    async def run(self) -> None:
        tasks = [asyncio.create_task(i.run(), name=f"webhook/{i!r}") for i in self.lookup.informers]
        await self.server.start()
        try:
            if self.register_url_host is not None and self.ca_bundle is not None:
                url = f"https://{self.register_url_host}:{self.server.port}{MUTATE_JOB_PATH}"
                await webhookconfig.ensure_webhook_configuration(
                    self.api, name=self.configuration_name, url=url, ca_bundle=self.ca_bundle
                )
                log.info("webhook registered at %s", url)
            self.started.set()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self.server.stop()
            if self._tmp is not None:
                self._tmp.cleanup()

    async def unregister(self) -> None:
        await webhookconfig.delete_webhook_configuration(self.api, self.configuration_name)
