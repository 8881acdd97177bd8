"""Several manager replicas and one webhook certificate, against a real kube-apiserver.

- Replicas that start together share ONE generated certificate through a Secret: one
  creates it, the others read it, and they all register the same caBundle (by Service
  reference, as in a cluster) instead of overwriting each other's.
- A kfed Secret whose certificate expires soon is renewed, the previous CA kept in the
  bundle; a Secret kfed did not create is never overwritten.
- A mounted certificate (cert-manager) that is renewed in place is served without a restart.

The lite manager apiserver is shared: each test uses its own namespace, Secret and webhook
configuration name, and removes them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.federation.webhooks import certs, webhookconfig
from manager.federation.webhooks.admission_webhook import (
    SHARED_VALIDITY,
    ManagerWebhook,
    serving_hosts,
    shared_serving_certificate,
)
from manager.kube import resources as R
from manager.kube.api import KubeApi

pytestmark = pytest.mark.integration

SECRET = "kfed-manager-webhook-cert"


@pytest.fixture
async def api(kueue_crds: LocalFederation) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(
        kueue_crds.cluster("manager").kubeconfig, name="manager"
    ) as client:
        yield client


@pytest.fixture
async def namespace(api: KubeApi, unique: str) -> AsyncIterator[str]:
    name = f"whcert-{unique}"
    await api.create(R.NAMESPACES, {"metadata": {"name": name}})
    yield name
    await api.delete(R.NAMESPACES, name)


async def served_certificate(port: int, server_name: str, bundle: bytes) -> bytes:
    """The certificate the webhook presents to a client that trusts ``bundle`` and dials
    ``server_name`` (as the apiserver would dial the Service)."""
    context = ssl.create_default_context(cadata=bundle.decode())
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=server_name
    )
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der: bytes = ssl_object.getpeercert(binary_form=True)
        return der
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


async def test_replicas_share_one_certificate_and_register_the_same_ca(
    api: KubeApi, namespace: str, unique: str
) -> None:
    service = webhookconfig.ServiceReference(namespace, "kfed-manager")
    configuration = f"kfed-manager-{unique}"
    replicas = [
        ManagerWebhook(
            api,
            cert_secret=(namespace, SECRET),
            service=service,
            configuration_name=configuration,
        )
        for _ in range(2)
    ]
    tasks = [asyncio.create_task(r.run()) for r in replicas]
    try:
        await wait_for(
            lambda: all(r.started.is_set() for r in replicas),
            timeout=60,
            what="both replicas serving",
        )
        secret = await api.get(R.SECRETS, SECRET, namespace)
        stored = certs.ServingCertificate.from_secret_data(secret["data"])
        registered = await api.get(R.MUTATING_WEBHOOKS, configuration)

        assert secret["type"] == "kubernetes.io/tls"
        assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kfed"
        assert [r.ca_bundle for r in replicas] == [stored.ca_bundle, stored.ca_bundle]
        client_config = registered["webhooks"][0]["clientConfig"]
        assert base64.b64decode(client_config["caBundle"]) == stored.ca_bundle
        assert client_config["service"] == service.as_dict()
        for replica in replicas:
            der = await served_certificate(
                replica.server.port, f"kfed-manager.{namespace}.svc", stored.ca_bundle
            )
            assert der == _der(stored.cert_pem), "every replica serves the shared certificate"
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await webhookconfig.delete_webhook_configuration(api, configuration)


async def test_an_expiring_shared_certificate_is_renewed_keeping_the_previous_ca(
    api: KubeApi, namespace: str
) -> None:
    hosts = serving_hosts("0.0.0.0", service=webhookconfig.ServiceReference(namespace, "kfed"))
    first = await shared_serving_certificate(api, namespace, SECRET, hosts)
    almost_expired = dt.datetime.now(dt.UTC) + SHARED_VALIDITY - dt.timedelta(days=10)

    renewed = await shared_serving_certificate(api, namespace, SECRET, hosts, now=almost_expired)
    read_again = await shared_serving_certificate(api, namespace, SECRET, hosts, now=almost_expired)

    assert renewed.cert_pem != first.cert_pem
    assert renewed.ca_bundle.endswith(first.ca_bundle), "replicas not yet restarted stay trusted"
    assert read_again == renewed, "renewed once, then read"


async def test_a_changed_service_name_renews_the_certificate(api: KubeApi, namespace: str) -> None:
    before = serving_hosts("0.0.0.0", service=webhookconfig.ServiceReference(namespace, "old"))
    after = serving_hosts("0.0.0.0", service=webhookconfig.ServiceReference(namespace, "new"))
    await shared_serving_certificate(api, namespace, SECRET, before)

    renewed = await shared_serving_certificate(api, namespace, SECRET, after)

    assert certs.renewal_reason(renewed, after, margin=dt.timedelta(days=30)) is None


async def test_a_secret_kfed_did_not_create_is_used_when_it_fits_and_never_overwritten(
    api: KubeApi, namespace: str
) -> None:
    hosts = ["127.0.0.1", "localhost"]
    theirs = certs.generate_serving_certificate(hosts)
    await api.create(
        R.SECRETS,
        {
            "metadata": {"name": SECRET, "namespace": namespace},
            "type": "kubernetes.io/tls",
            "data": theirs.secret_data(),
        },
        namespace,
    )

    assert await shared_serving_certificate(api, namespace, SECRET, hosts) == theirs
    with pytest.raises(ValueError, match=r"other\.example\) and kfed did not create it"):
        await shared_serving_certificate(api, namespace, SECRET, [*hosts, "other.example"])
    unchanged = await api.get(R.SECRETS, SECRET, namespace)
    assert certs.ServingCertificate.from_secret_data(unchanged["data"]) == theirs


async def test_a_secret_of_another_type_is_refused(api: KubeApi, namespace: str) -> None:
    await api.create(
        R.SECRETS,
        {"metadata": {"name": SECRET, "namespace": namespace}, "stringData": {"a": "b"}},
        namespace,
    )

    with pytest.raises(ValueError, match="its type is 'Opaque'"):
        await shared_serving_certificate(api, namespace, SECRET, ["127.0.0.1"])


async def test_a_mounted_certificate_renewed_in_place_is_served_without_restart(
    api: KubeApi, tmp_path: Path
) -> None:
    ca = certs.generate_serving_certificate(["127.0.0.1"])
    ca.write(tmp_path)
    webhook = ManagerWebhook(api, cert_dir=tmp_path, reload_period=0.05)
    task = asyncio.create_task(webhook.run())
    try:
        await asyncio.wait_for(webhook.started.wait(), 30)
        # A full run once had this first connection reset on a loaded machine: try again.
        first = await wait_for(
            lambda: served_certificate(webhook.server.port, "127.0.0.1", ca.ca_pem),
            timeout=30,
            what="a certificate served",
            ignore=(ConnectionError,),
        )
        assert first == _der(ca.cert_pem)

        renewed = certs.generate_serving_certificate(["127.0.0.1"])
        renewed.write(tmp_path)

        # Trust both CAs: a client that trusts only the new one fails its handshake while
        # the old certificate is still served, and a failed TLS handshake leaves its socket
        # transport to the garbage collector (a ResourceWarning in some later test).
        both = ca.ca_pem + renewed.ca_pem

        async def serves_the_renewed_one() -> bool:
            served = await served_certificate(webhook.server.port, "127.0.0.1", both)
            return served == _der(renewed.cert_pem)

        await wait_for(serves_the_renewed_one, timeout=60, what="the renewed certificate served")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())
