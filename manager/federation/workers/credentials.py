"""When a worker's credentials stop working, read from its kubeconfig: the ``exp`` claim of a
bearer token that is a JWT (a ServiceAccount token from a TokenRequest, say), and the end of
a client certificate's validity. Read, never verified: the worker verifies them; kfed only
wants to warn before they run out. Pure: kubeconfig and clock in, facts out.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from cryptography import x509

TOKEN, CLIENT_CERTIFICATE = "token", "client certificate"


@dataclass(frozen=True, slots=True)
class Expiry:
    at: dt.datetime
    what: str
    """Which credential: ``token`` or ``client certificate``."""
    service_account: tuple[str, str] | None = None
    """(namespace, name) of the ServiceAccount a token was issued for, when it says."""

    def left(self, now: dt.datetime) -> dt.timedelta:
        return self.at - now


def _user_of(config: dict[str, Any], context: str) -> dict[str, Any]:
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    user_name = contexts.get(context, {}).get("user")
    users = {u.get("name"): u.get("user") or {} for u in config.get("users") or []}
    user = users.get(user_name, {})
    return user if isinstance(user, dict) else {}


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The claims of a JWT (its middle part), or None when the token is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    return claims if isinstance(claims, dict) else None


def service_account_of(claims: dict[str, Any]) -> tuple[str, str] | None:
    """The ServiceAccount a Kubernetes token names: its ``sub``,
    ``system:serviceaccount:<namespace>:<name>``."""
    subject = str(claims.get("sub") or "")
    prefix = "system:serviceaccount:"
    if not subject.startswith(prefix) or subject.count(":") != 3:
        return None
    namespace, name = subject.removeprefix(prefix).split(":")
    return namespace, name


def token_expiry(token: str) -> Expiry | None:
    claims = jwt_claims(token)
    if claims is None or not isinstance(claims.get("exp"), int | float):
        return None
    at = dt.datetime.fromtimestamp(claims["exp"], dt.UTC)
    return Expiry(at, TOKEN, service_account_of(claims))


def certificate_expiry(data: str) -> Expiry | None:
    try:
        cert = x509.load_pem_x509_certificate(base64.b64decode(data))
    except (binascii.Error, ValueError):
        return None
    return Expiry(cert.not_valid_after_utc, CLIENT_CERTIFICATE)


def expiry_of(config: dict[str, Any], context: str) -> Expiry | None:
    """The first moment the context's credentials stop working, when it can be read."""
    user = _user_of(config, context)
    found = [
        e
        for e in (
            token_expiry(str(user["token"])) if user.get("token") else None,
            certificate_expiry(str(user["client-certificate-data"]))
            if user.get("client-certificate-data")
            else None,
        )
        if e is not None
    ]
    return min(found, key=lambda e: e.at) if found else None


def expiring(expiry: Expiry | None, now: dt.datetime, warn_before: dt.timedelta) -> bool:
    return expiry is not None and expiry.left(now) <= warn_before


def describe(cluster: str, expiry: Expiry, now: dt.datetime | None = None) -> str:
    """One line for the condition and the Event (absolute time, so it stays the same while
    nothing changes) or, given ``now``, for a person (with the time left)."""
    when = expiry.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if now is not None and expiry.left(now) <= dt.timedelta(0):
        return f"the {expiry.what} of {cluster}'s kubeconfig expired at {when}"
    span = ""
    if now is not None:
        hours, rest = divmod(int(expiry.left(now).total_seconds()), 3600)
        span = f" (in {hours}h{rest // 60:02d}m)" if hours else f" (in {rest // 60}m)"
    advice = f"; `kfed cluster rotate {cluster}` mints a new one" if expiry.what == TOKEN else ""
    return f"the {expiry.what} of {cluster}'s kubeconfig expires at {when}{span}{advice}"
