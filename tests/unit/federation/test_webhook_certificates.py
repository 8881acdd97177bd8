"""The webhook's certificate schemes, without a cluster: a serving certificate stored as a
``kubernetes.io/tls`` Secret and read back, when a stored one must be renewed, the names a
certificate must carry for in-cluster registration, and flags that cannot go together."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509

from manager.federation.webhooks import certs
from manager.federation.webhooks.admission_webhook import ManagerWebhook, serving_hosts
from manager.federation.webhooks.webhookconfig import ServiceReference
from manager.kube.api import KubeApi

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
HOSTS = ["kfed-manager.kueue-system.svc", "127.0.0.1"]
MARGIN = dt.timedelta(days=30)


def fresh(hosts: list[str] = HOSTS, *, days: int = 365) -> certs.ServingCertificate:
    return certs.generate_serving_certificate(hosts, validity=dt.timedelta(days=days), now=NOW)


def test_a_certificate_round_trips_through_secret_data() -> None:
    original = fresh()

    data = original.secret_data()

    assert set(data) == {"tls.crt", "tls.key", "ca.crt"}
    assert certs.ServingCertificate.from_secret_data(data) == original


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (None, "has no data"),
        ({"tls.crt": "eA==", "tls.key": "eA=="}, "has no ca.crt"),
        ({"tls.crt": "eA==", "tls.key": "", "ca.crt": "eA=="}, "has no tls.key"),
        ({"tls.crt": "not base64!", "tls.key": "eA==", "ca.crt": "eA=="}, "tls.crt is not valid"),
    ],
)
def test_unreadable_secret_data_says_what_is_wrong(data: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        certs.ServingCertificate.from_secret_data(data)


def test_a_fresh_certificate_for_the_hosts_needs_no_renewal() -> None:
    assert certs.renewal_reason(fresh(), HOSTS, margin=MARGIN, now=NOW) is None


def test_hosts_match_whatever_the_spelling_of_an_ip_address() -> None:
    cert = fresh(["::1"])

    assert certs.renewal_reason(cert, ["0:0:0:0:0:0:0:1"], margin=MARGIN, now=NOW) is None


def test_a_certificate_close_to_expiry_is_renewed() -> None:
    cert = fresh(days=365)

    later = NOW + dt.timedelta(days=340)

    assert (
        certs.renewal_reason(cert, HOSTS, margin=MARGIN, now=later) or ""
    ) == "it expires at 2031-01-01T00:00:00Z"


def test_a_certificate_not_yet_valid_is_renewed() -> None:
    cert = fresh()

    reason = certs.renewal_reason(cert, HOSTS, margin=MARGIN, now=NOW - dt.timedelta(days=1))

    assert reason is not None and "valid only from" in reason


def test_a_certificate_without_a_host_is_renewed() -> None:
    cert = fresh(["127.0.0.1"])

    reason = certs.renewal_reason(cert, HOSTS, margin=MARGIN, now=NOW)

    assert reason == "it does not name kfed-manager.kueue-system.svc"


def test_a_key_of_another_certificate_is_refused() -> None:
    one, other = fresh(), fresh()
    mixed = certs.ServingCertificate(one.ca_pem, one.cert_pem, key_pem=other.key_pem)

    assert certs.renewal_reason(mixed, HOSTS, margin=MARGIN, now=NOW) == (
        "the key does not belong to the certificate"
    )


def test_a_bundle_without_the_issuing_ca_is_refused() -> None:
    one, other = fresh(), fresh()
    foreign = certs.ServingCertificate(other.ca_pem, one.cert_pem, one.key_pem)

    assert certs.renewal_reason(foreign, HOSTS, margin=MARGIN, now=NOW) == (
        "no CA of its bundle issued it"
    )


def test_garbage_is_unreadable() -> None:
    garbage = certs.ServingCertificate(ca_pem=b"x", cert_pem=b"y", key_pem=b"z")

    assert (certs.renewal_reason(garbage, HOSTS, margin=MARGIN, now=NOW) or "").startswith(
        "unreadable"
    )


def test_a_bundle_keeps_only_unexpired_authorities() -> None:
    short, long = fresh(days=10), fresh(days=400)
    bundle = short.ca_pem + long.ca_pem

    kept = certs.unexpired_authorities(bundle, now=NOW + dt.timedelta(days=20))

    assert [c.subject for c in x509.load_pem_x509_certificates(kept)] == [
        x509.load_pem_x509_certificate(long.ca_pem).subject
    ]
    assert certs.unexpired_authorities(b"garbage", now=NOW) == b""


def test_in_cluster_registration_names_every_spelling_of_the_service() -> None:
    hosts = serving_hosts("0.0.0.0", service=ServiceReference("kueue-system", "kfed-manager"))

    assert hosts == [
        "127.0.0.1",
        "kfed-manager",
        "kfed-manager.kueue-system",
        "kfed-manager.kueue-system.svc",
        "kfed-manager.kueue-system.svc.cluster.local",
        "localhost",
    ]


def test_url_registration_names_the_registered_host() -> None:
    assert serving_hosts("0.0.0.0", "10.1.2.3") == ["10.1.2.3", "127.0.0.1", "localhost"]
    assert serving_hosts("192.168.0.7") == ["127.0.0.1", "192.168.0.7", "localhost"]


async def test_conflicting_certificate_and_registration_choices_are_refused(
    tmp_path: Path,
) -> None:
    api = KubeApi(client=None)  # type: ignore[arg-type]  # never used: refused at construction

    with pytest.raises(ValueError, match="cert_dir and cert_secret"):
        ManagerWebhook(api, cert_dir=tmp_path, cert_secret=("kueue-system", "cert"))
    with pytest.raises(ValueError, match="register_url_host and service"):
        ManagerWebhook(
            api,
            register_url_host="127.0.0.1",
            service=ServiceReference("kueue-system", "kfed-manager"),
        )
