"""Worker kubeconfigs: parse them and refuse the unsafe ones before any connection is made.

A kubeconfig stored in a Secret is handed to kfed by a cluster admin, but it is read by the
manager's process: anything that would make the manager run a program (exec plugins, auth
providers), read a file of its own filesystem (token or certificate paths), or skip server
verification is refused, as upstream MultiKueue's validation does. The only credentials kept
are inline ones: a bearer token or client certificate data.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from manager.api import constants as C
from manager.api.view import at

# Condition reasons on MultiKueueCluster Active=False (upstream's names where they exist).
BAD_KUBECONFIG = C.REASON_BAD_KUBECONFIG
INSECURE_KUBECONFIG = "InsecureKubeConfig"

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


class KubeconfigRejected(ValueError):
    """Why a kubeconfig cannot be used: ``reason`` is the condition reason, the message says
    what is wrong and where."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CheckedKubeconfig:
    """A kubeconfig that passed validation, reduced to the one context it uses."""

    config: dict[str, Any]
    context: str
    server: str


def _bad(message: str) -> KubeconfigRejected:
    return KubeconfigRejected(BAD_KUBECONFIG, message)


def _insecure(message: str) -> KubeconfigRejected:
    return KubeconfigRejected(INSECURE_KUBECONFIG, message)


def _named(entries: Any, what: str) -> dict[str, dict[str, Any]]:
    if not isinstance(entries, list):
        raise _bad(f"kubeconfig has no {what} list")
    result = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad(f"kubeconfig {what} entry without a name")
        body = entry.get(what[:-1])
        if not isinstance(body, dict):
            raise _bad(f"kubeconfig {what[:-1]} {entry['name']!r} has no {what[:-1]} section")
        result[entry["name"]] = body
    return result


def _check_base64(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        raise _bad(f"{where} is empty")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{where} is not valid base64") from None


def _check_server(server: Any, cluster: str) -> str:
    """The server URL, or a refusal. A refusal never repeats the parts of the URL that can
    hold a secret (userinfo, query string, fragment): the message goes into the
    MultiKueueCluster's condition, the dashboard, ``kfed cluster list`` and the logs."""
    if not isinstance(server, str) or not server.strip():
        raise _bad(f"cluster {cluster!r} has an empty server")
    if any(ch.isspace() or not ch.isprintable() for ch in server):
        # urlsplit silently drops leading blanks, tabs and newlines: the URL it would judge
        # is not the one the HTTP client is given.
        where = (
            "leading or trailing whitespace"
            if server != server.strip()
            else "whitespace or a control character"
        )
        raise _bad(f"cluster {cluster!r} server URL has {where}; write the bare https URL")
    if "@" in server:
        # Never echo this URL: it carries a password. The HTTP client cannot use it either
        # (it refuses credentials in the URL), so the worker would never connect.
        raise _insecure(
            f"cluster {cluster!r} server URL carries credentials (user:password@host); put "
            "the credentials in the kubeconfig's user entry instead"
        )
    if "?" in server:
        raise _insecure(
            f"cluster {cluster!r} server URL has a query string (?...), which can carry "
            "credentials and would be shown wherever the server is; put the credentials in "
            "the kubeconfig's user entry (token or client certificate data) instead"
        )
    if "#" in server:
        raise _bad(
            f"cluster {cluster!r} server URL has a fragment (#...); write the bare https URL"
        )
    try:
        parts = urlsplit(server)
        _ = parts.port
    except ValueError:
        raise _bad(
            f"cluster {cluster!r} server {server!r} has an invalid port or address"
        ) from None
    if parts.scheme != "https":
        raise _insecure(f"cluster {cluster!r} server {server!r} is not https")
    host = parts.hostname or ""
    valid_ip = _IPV4.match(host) and all(int(p) < 256 for p in host.split("."))
    if not (valid_ip or ":" in host or _DNS1123.match(host)):
        raise _bad(
            f"cluster {cluster!r} server host {host!r} is neither an IP address nor a DNS name"
        )
    return server


# -- showing a server URL ----------------------------------------------------------------------

REDACTED = "[redacted]"

_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
_QUOTED_SERVER = re.compile(r"(server )(['\"])(.*?)\2")


def redact_server(url: str) -> str:
    """A server URL as it may be shown: its userinfo (``user:password@``), query string and
    fragment replaced by ``[redacted]``. For URLs stored before kfed refused these (or any
    text taken for one): it never fails and never returns what it removed."""
    text = url
    cut = min((i for i in (text.find("?"), text.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        text = text[: cut + 1] + REDACTED
    scheme = text.find("://")
    start = scheme + 3 if scheme >= 0 else 0
    head = text[start:]
    if "@" in head.removesuffix(REDACTED):
        # Up to the last '@': a password may itself hold '/', ':' or '@'.
        text = text[:start] + REDACTED + "@" + head.rsplit("@", 1)[1]
    return text


def redact_text(text: str) -> str:
    """A message (a condition's, an error's) with every URL in it, and every quoted
    ``server '...'`` an older kfed wrote, shown through ``redact_server``."""
    text = _QUOTED_SERVER.sub(lambda m: m[1] + m[2] + redact_server(m[3]) + m[2], text)
    return _URL_IN_TEXT.sub(lambda m: redact_server(m[0]), text)


def check(text: str | bytes, *, context: str | None = None) -> CheckedKubeconfig:
    """Validate a kubeconfig and reduce it to one context; raises KubeconfigRejected."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise _bad(f"kubeconfig is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise _bad("kubeconfig is not a YAML mapping")
    clusters = _named(raw.get("clusters"), "clusters")
    users = _named(raw.get("users"), "users")
    contexts = _named(raw.get("contexts"), "contexts")
    name = context or raw.get("current-context")
    if not name:
        raise _bad("kubeconfig has no current-context and no context was given")
    if name not in contexts:
        raise _bad(f"kubeconfig has no context {name!r}")
    ctx = contexts[name]
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if cluster_name not in clusters:
        raise _bad(f"context {name!r} names cluster {cluster_name!r}, which the kubeconfig lacks")
    if user_name not in users:
        raise _bad(f"context {name!r} names user {user_name!r}, which the kubeconfig lacks")
    cluster, user = clusters[cluster_name], users[user_name]

    if cluster.get("insecure-skip-tls-verify"):
        raise _insecure(f"cluster {cluster_name!r} sets insecure-skip-tls-verify")
    if "certificate-authority" in cluster:
        raise _insecure(
            f"cluster {cluster_name!r} reads its CA from a file path "
            "(use certificate-authority-data)"
        )
    if "certificate-authority-data" in cluster:
        _check_base64(
            cluster["certificate-authority-data"],
            f"cluster {cluster_name!r} certificate-authority-data",
        )
    if "proxy-url" in cluster:
        raise _insecure(f"cluster {cluster_name!r} sets a proxy-url")
    server = _check_server(cluster.get("server"), str(cluster_name))

    for field, why in (
        ("exec", "runs an exec credential plugin"),
        ("auth-provider", "uses an auth provider plugin"),
        ("tokenFile", "reads a token from a file path"),
        ("client-certificate", "reads its client certificate from a file path"),
        ("client-key", "reads its client key from a file path"),
        ("username", "uses basic authentication"),
        ("password", "uses basic authentication"),
        ("as", "impersonates another user"),
    ):
        if field in user:
            raise _insecure(f"user {user_name!r} {why} ({field})")
    has_token = bool(user.get("token"))
    has_cert = "client-certificate-data" in user or "client-key-data" in user
    if has_cert:
        _check_base64(
            user.get("client-certificate-data"), f"user {user_name!r} client-certificate-data"
        )
        _check_base64(user.get("client-key-data"), f"user {user_name!r} client-key-data")
    if not (has_token or has_cert):
        raise _bad(f"user {user_name!r} has no credentials (token or client certificate data)")

    reduced = single(cluster, user, cluster_name=cluster_name, user_name=user_name, context=name)
    return CheckedKubeconfig(config=reduced, context=str(name), server=server)


def single(
    cluster: dict[str, Any],
    user: dict[str, Any],
    *,
    cluster_name: Any,
    user_name: Any,
    context: Any,
) -> dict[str, Any]:
    """A kubeconfig of one cluster, one user and the one context that joins them."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user_name}}],
        "current-context": context,
    }


# -- the Secret that holds a worker's kubeconfig ------------------------------------------------


def secret_data(text: str) -> dict[str, str]:
    """A Secret's ``data`` holding this kubeconfig under upstream's key ``kubeconfig``."""
    return {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: base64.b64encode(text.encode()).decode()}


def from_secret(secret: dict[str, Any]) -> str:
    """The kubeconfig text a worker's Secret holds. Raises KubeconfigRejected (BadKubeConfig)
    when the key is missing or not base64 text; ``check`` then judges the text itself."""
    meta = at(secret, "metadata")
    where = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    data = (secret.get("data") or {}).get(C.MULTIKUEUE_KUBECONFIG_SECRET_KEY)
    if not data:
        raise _bad(f"{where} has no key {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY!r}")
    try:
        return base64.b64decode(data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise _bad(f"the kubeconfig in {where} is not valid base64 text") from None
