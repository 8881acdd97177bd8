"""Reading when a worker kubeconfig's credentials run out: a ServiceAccount token's exp
claim, a client certificate's validity, whichever comes first; non-JWT tokens and garbage
give no expiry rather than an error."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from manager.federation.webhooks.certs import generate_serving_certificate
from manager.federation.workers import credentials

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


def jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def kubeconfig(user: dict[str, Any]) -> dict[str, Any]:
    return {
        "clusters": [{"name": "c", "cluster": {"server": "https://w:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }


SA_TOKEN = jwt(
    {"exp": int((NOW + dt.timedelta(hours=2)).timestamp()),
     "sub": "system:serviceaccount:kueue-system:kfed-manager-remote"}
)  # fmt: skip


def test_a_service_account_token_says_when_and_for_whom() -> None:
    expiry = credentials.expiry_of(kubeconfig({"token": SA_TOKEN}), "x")
    assert expiry is not None
    assert expiry.at == NOW + dt.timedelta(hours=2)
    assert expiry.what == credentials.TOKEN
    assert expiry.service_account == ("kueue-system", "kfed-manager-remote")


def test_tokens_that_are_not_jwts_have_no_expiry() -> None:
    for token in ("abcdef", "a.b", "a.!!!.c", jwt({"sub": "x"}), jwt({"exp": "soon"})):
        assert credentials.expiry_of(kubeconfig({"token": token}), "x") is None


def test_a_client_certificate_expires_with_its_validity() -> None:
    cert = generate_serving_certificate(["w"], validity=dt.timedelta(days=3), now=NOW)
    data = base64.b64encode(cert.cert_pem).decode()
    expiry = credentials.expiry_of(kubeconfig({"client-certificate-data": data}), "x")
    assert expiry is not None and expiry.what == credentials.CLIENT_CERTIFICATE
    assert NOW + dt.timedelta(days=2) < expiry.at <= NOW + dt.timedelta(days=3, minutes=5)


def test_the_first_of_two_credentials_counts() -> None:
    cert = generate_serving_certificate(["w"], validity=dt.timedelta(days=3), now=NOW)
    data = base64.b64encode(cert.cert_pem).decode()
    expiry = credentials.expiry_of(
        kubeconfig({"token": SA_TOKEN, "client-certificate-data": data}), "x"
    )
    assert expiry is not None and expiry.what == credentials.TOKEN


def test_another_context_or_garbage_gives_nothing() -> None:
    assert credentials.expiry_of(kubeconfig({"token": SA_TOKEN}), "other") is None
    assert credentials.expiry_of(kubeconfig({"client-certificate-data": "bm9wZQ=="}), "x") is None


def test_expiring_and_the_words_for_it() -> None:
    expiry = credentials.token_expiry(SA_TOKEN)
    assert expiry is not None
    assert credentials.expiring(expiry, NOW, dt.timedelta(hours=6))
    assert not credentials.expiring(expiry, NOW, dt.timedelta(hours=1))
    assert not credentials.expiring(None, NOW, dt.timedelta(hours=6))
    steady = credentials.describe("worker-1", expiry)
    assert steady == (
        "the token of worker-1's kubeconfig expires at 2026-12-02T14:00:00Z; "
        "`kfed cluster rotate worker-1` mints a new one"
    )
    assert "(in 2h00m)" in credentials.describe("worker-1", expiry, NOW)
    later = NOW + dt.timedelta(hours=3)
    assert credentials.describe("worker-1", expiry, later).endswith(
        "expired at 2026-12-02T14:00:00Z"
    )
