"""Runs the Job webhook next to the manager: its own light informers (LocalQueues,
ClusterQueues, AdmissionChecks), so every replica answers, leader or not; the serving
certificate; and, optionally, the registration of the MutatingWebhookConfiguration.

Where the serving certificate comes from, one of:

- ``cert_dir``: files mounted from a ``kubernetes.io/tls`` Secret (e.g. issued by
  cert-manager, whose CA injector fills the configuration's caBundle). The files are checked
  every ``reload_period`` seconds; a renewed certificate is served without a restart.
- ``cert_secret``: replicas share ONE generated certificate through that Secret: the first
  replica creates it, the others read it, so they all register the same caBundle instead of
  overwriting each other's. It is renewed (by whichever replica starts first) when it comes
  within ``RENEW_BEFORE`` of expiry or no longer names the webhook's hosts; the renewed
  bundle keeps the previous CA, so replicas still serving the previous certificate stay
  trusted until they restart.
- neither: a certificate generated for this process alone (one replica, local test bed).

Registration is by URL (``register_url_host``: out-of-cluster managers, the local test bed)
or by reference to the in-cluster Service in front of the replicas (``service``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import tempfile
from pathlib import Path

from manager.api.view import labels_of
from manager.controllers.state import ClusterState
from manager.federation.webhooks import certs, webhookconfig
from manager.federation.webhooks.webhook import MUTATE_JOB_PATH, ClusterStateQueues, WebhookServer
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)

SHARED_VALIDITY = dt.timedelta(days=3650)
"""A shared certificate lives long: renewing it means every replica restarting."""
RENEW_BEFORE = dt.timedelta(days=30)
MANAGED_BY = {"app.kubernetes.io/managed-by": "kfed"}
_CONFLICT_RETRIES = 5


class ManagerWebhook:
    def __init__(
        self,
        api: KubeApi,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cert_dir: Path | None = None,
        cert_secret: tuple[str, str] | None = None,
        register_url_host: str | None = None,
        service: webhookconfig.ServiceReference | None = None,
        configuration_name: str = "kfed-manager",
        reload_period: float = 30.0,
    ) -> None:
        if cert_dir is not None and cert_secret is not None:
            raise ValueError("give at most one of cert_dir and cert_secret")
        if register_url_host is not None and service is not None:
            raise ValueError("give at most one of register_url_host and service")
        self.api = api
        self.state = ClusterState(api)
        self.lookup = ClusterStateQueues(self.state)
        self.cert_secret = cert_secret
        """(namespace, name) of the Secret the replicas share the certificate through."""
        self.register_url_host = register_url_host
        self.service = service
        self.configuration_name = configuration_name
        self.reload_period = reload_period
        self.hosts = serving_hosts(host, register_url_host, service)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.mounted = cert_dir is not None
        if cert_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kfed-webhook-")
            cert_dir = Path(self._tmp.name)
        self.cert_dir = cert_dir
        self.ca_bundle: bytes | None = None
        if cert_secret is None and not (cert_dir / certs.CERT_FILE).exists():
            self.ca_bundle = certs.write_serving_certificate(cert_dir, self.hosts)
        elif (cert_dir / certs.CA_FILE).exists():
            self.ca_bundle = (cert_dir / certs.CA_FILE).read_bytes()
        self.server = WebhookServer(self.lookup, host, port, cert_dir)
        self.started = asyncio.Event()

    async def run(self) -> None:
        if self.cert_secret is not None:
            namespace, name = self.cert_secret
            shared = await shared_serving_certificate(self.api, namespace, name, self.hosts)
            shared.write(self.cert_dir)
            self.ca_bundle = shared.ca_bundle
        tasks = [asyncio.create_task(i.run(), name=f"webhook/{i!r}") for i in self.lookup.informers]
        await self.server.start()
        try:
            await self.register()
            if self.mounted:
                tasks.append(asyncio.create_task(self._reload_on_change(), name="webhook/reload"))
            self.started.set()
            await asyncio.gather(*tasks)
        finally:
            await stop_tasks(tasks)
            await self.server.stop()
            if self._tmp is not None:
                self._tmp.cleanup()

    async def register(self) -> None:
        """Write the webhook configuration, when asked to, with the current CA bundle."""
        if self.register_url_host is None and self.service is None:
            return
        if self.ca_bundle is None:
            log.warning(
                "webhook not registered: %s has no %s to use as caBundle",
                self.cert_dir,
                certs.CA_FILE,
            )
            return
        url = None
        if self.service is not None:
            svc = self.service
            where = f"service {svc.namespace}/{svc.name}:{svc.port}{svc.path}"
        else:
            url = where = f"https://{self.register_url_host}:{self.server.port}{MUTATE_JOB_PATH}"
        await webhookconfig.ensure_webhook_configuration(
            self.api,
            name=self.configuration_name,
            url=url,
            service=self.service,
            ca_bundle=self.ca_bundle,
        )
        log.info("webhook registered at %s", where)

    async def _reload_on_change(self) -> None:
        """Serve a renewed mounted certificate: kubelet swaps the Secret's files in place
        (cert-manager renews before expiry); the server restarts on the same port."""
        seen = _fingerprint(self.cert_dir)
        while True:
            await asyncio.sleep(self.reload_period)
            current = _fingerprint(self.cert_dir)
            if current == seen or current is None:
                continue
            seen = current
            log.info("serving certificate in %s changed: reloading", self.cert_dir)
            await self.server.stop()
            await self.server.start()
            ca = self.cert_dir / certs.CA_FILE
            if ca.exists() and ca.read_bytes() != self.ca_bundle:
                self.ca_bundle = ca.read_bytes()
                await self.register()

    async def unregister(self) -> None:
        await webhookconfig.delete_webhook_configuration(self.api, self.configuration_name)


def serving_hosts(
    host: str,
    register_url_host: str | None = None,
    service: webhookconfig.ServiceReference | None = None,
) -> list[str]:
    """The names the apiserver may dial, for the certificate's subject alternative names:
    the Service's DNS names (short to fully qualified), the registered URL's host, and the
    loopback names. Sorted, so every replica computes the same list."""
    hosts = {"127.0.0.1", "localhost"}
    if host not in ("0.0.0.0", "::", ""):
        hosts.add(host)
    if register_url_host:
        hosts.add(register_url_host)
    if service is not None:
        base = f"{service.name}.{service.namespace}"
        hosts |= {service.name, base, f"{base}.svc", f"{base}.svc.cluster.local"}
    return sorted(hosts)


async def shared_serving_certificate(
    api: KubeApi,
    namespace: str,
    name: str,
    hosts: list[str],
    *,
    now: dt.datetime | None = None,
) -> certs.ServingCertificate:
    """The certificate in Secret ``namespace/name``: created when absent (the first replica
    wins, the others read the winner's), renewed when it no longer fits. Only Secrets that
    kfed created are ever replaced; ValueError says why another one cannot be used."""
    for _ in range(_CONFLICT_RETRIES):
        try:
            secret = await api.get(R.SECRETS, name, namespace)
        except errors.NotFound:
            fresh = certs.generate_serving_certificate(hosts, validity=SHARED_VALIDITY, now=now)
            try:
                await api.create(R.SECRETS, _secret(namespace, name, fresh), namespace)
            except errors.AlreadyExists:
                continue  # another replica created it first: use theirs
            log.info("created the shared webhook certificate in Secret %s/%s", namespace, name)
            return fresh
        reason = _unusable(secret, hosts, now)
        if reason is None:
            return certs.ServingCertificate.from_secret_data(secret.get("data"))
        labels = labels_of(secret)
        if any(labels.get(k) != v for k, v in MANAGED_BY.items()):
            raise ValueError(
                f"Secret {namespace}/{name} cannot serve the webhook ({reason}) and kfed did not "
                "create it: fix or delete it"
            )
        renewed = _renewal(secret, hosts, now)
        try:
            await api.replace(R.SECRETS, {**_secret(namespace, name, renewed), **_kept(secret)})
        except errors.Conflict:
            continue  # another replica renewed it meanwhile: read theirs
        log.warning("renewed the shared webhook certificate in %s/%s: %s", namespace, name, reason)
        return renewed
    raise errors.Conflict(409, "Conflict", f"Secret {namespace}/{name} kept changing")


def _unusable(secret: Obj, hosts: list[str], now: dt.datetime | None) -> str | None:
    if secret.get("type") != certs.SECRET_TYPE:
        return f"its type is {secret.get('type')!r}, not {certs.SECRET_TYPE}"
    try:
        stored = certs.ServingCertificate.from_secret_data(secret.get("data"))
    except ValueError as err:
        return str(err)
    return certs.renewal_reason(stored, hosts, margin=RENEW_BEFORE, now=now)


def _renewal(secret: Obj, hosts: list[str], now: dt.datetime | None) -> certs.ServingCertificate:
    fresh = certs.generate_serving_certificate(hosts, validity=SHARED_VALIDITY, now=now)
    try:
        previous = certs.ServingCertificate.from_secret_data(secret.get("data")).ca_pem
    except ValueError:
        return fresh
    kept = certs.unexpired_authorities(previous, now=now)
    return certs.ServingCertificate(
        ca_pem=fresh.ca_pem + kept, cert_pem=fresh.cert_pem, key_pem=fresh.key_pem
    )


def _secret(namespace: str, name: str, certificate: certs.ServingCertificate) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "type": certs.SECRET_TYPE,
        "data": certificate.secret_data(),
    }


def _kept(secret: Obj) -> Obj:
    """The metadata a replace must carry: resourceVersion guards against a concurrent one."""
    meta = {k: v for k, v in secret["metadata"].items() if k != "managedFields"}
    return {
        "metadata": {
            **meta,
            "labels": {**labels_of(secret), **MANAGED_BY},
        }
    }


def _fingerprint(directory: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        for name in (certs.CERT_FILE, certs.KEY_FILE):
            digest.update((directory / name).read_bytes())
    except OSError:
        return None  # mid-swap: look again next period
    return digest.hexdigest()
