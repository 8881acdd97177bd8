"""Workers registered by a ClusterProfile (the cluster inventory API) instead of a kubeconfig
Secret: which endpoint to use and how to get credentials for it, as upstream Kueue (v0.19,
gate ``MultiKueueClusterProfile``) and the inventory's access library read them. Pure: the
ClusterProfile and the platform's providers in, a decision out; running the plugin is
execplugin.py's, the connection the registry's.

- The platform configures access providers (Kueue's ``multiKueue.clusterProfile.
  accessProviders``, or the deprecated ``credentialsProviders``): a name and an exec
  credentials plugin each.
- A ClusterProfile lists in ``status.accessProviders`` (or the deprecated
  ``credentialProviders``, whose same-named entries ``accessProviders`` overrides) the
  endpoints it can be reached by, one per provider name. The first configured provider the
  profile lists is used: its ``cluster`` gives server and CA, its plugin the credentials.
- Only the platform's configuration may name a program for the manager to run; a
  ClusterProfile only chooses among them. The endpoint still passes kubeconfig.py's checks
  (https, no insecure-skip-tls-verify, no proxy, no credentials in the URL), and the
  credential the plugin prints must be inline (a token, or client certificate and key).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from manager.api import clusterprofile as cp
from manager.api.view import at, items
from manager.federation.accessproviders import Provider
from manager.federation.workers import kubeconfig

# Condition reasons on MultiKueueCluster Active=False.
REASON_PROFILE_NOT_FOUND = "ClusterProfileNotFound"
REASON_NO_ACCESS_PROVIDER = "NoMatchingAccessProvider"
REASON_BAD_PROFILE = "BadClusterProfile"
"""Upstream's reason for every ClusterProfile problem; kfed's for a malformed one."""
REASON_CREDENTIALS_FAILED = "CredentialsFailed"
REASON_PROFILE_DELETED = "ClusterProfileDeleted"
"""Its ClusterProfile went away: the worker was drained, then let go."""

REFRESH_BEFORE = 0.2
"""A plugin's credential is fetched again when this share of its life is left (a one-hour
token: after 48 minutes)."""


class ProfileProblem(ValueError):
    """Why a ClusterProfile cannot be used: ``reason`` for the condition, and the message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Access:
    """How to reach one worker: its provider, and the endpoint its ClusterProfile gives."""

    provider: Provider
    cluster: dict[str, Any]
    """The kubeconfig cluster entry (server, certificate-authority-data, ...)."""

    @property
    def server(self) -> str:
        return str(self.cluster.get("server") or "")

    def fingerprint(self) -> str:
        return json.dumps([self.provider.name, self.cluster], sort_keys=True)


def access_of(profile: dict[str, Any], providers: tuple[Provider, ...]) -> Access:
    """The endpoint and provider to use for ``profile``; raises ProfileProblem."""
    name = at(profile, "metadata").get("name")
    offered: dict[str, dict[str, Any]] = {}
    for key in (cp.CREDENTIAL_PROVIDERS, cp.ACCESS_PROVIDERS):  # accessProviders win
        for entry in items(profile, "status", key):
            if isinstance(entry.get("name"), str):
                offered[entry["name"]] = dict(at(entry, "cluster"))
    if not providers:
        raise ProfileProblem(
            REASON_NO_ACCESS_PROVIDER,
            "the manager has no ClusterProfile access providers configured "
            "(multiKueue.clusterProfile.accessProviders)",
        )
    provider = next((p for p in providers if p.name in offered), None)
    if provider is None:
        listed = ", ".join(sorted(offered)) or "none"
        configured = ", ".join(p.name for p in providers)
        raise ProfileProblem(
            REASON_NO_ACCESS_PROVIDER,
            f"ClusterProfile {name} lists no access provider the manager is configured for "
            f"(it lists: {listed}; configured: {configured})",
        )
    cluster = offered[provider.name]
    if not cluster.get("server"):
        raise ProfileProblem(
            REASON_BAD_PROFILE,
            f"ClusterProfile {name}: access provider {provider.name!r} gives no cluster server",
        )
    return Access(provider, dict(cluster))


@dataclass(frozen=True, slots=True)
class Credential:
    """What a plugin printed: a bearer token, or a client certificate and key (PEM)."""

    token: str | None = None
    certificate: str | None = None
    key: str | None = None
    expires: dt.datetime | None = None
    fetched: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def refresh_at(self) -> dt.datetime | None:
        """When to fetch it again: before it expires (never, when it does not say)."""
        if self.expires is None:
            return None
        return self.expires - (self.expires - self.fetched) * REFRESH_BEFORE


def exec_info(access: Access) -> dict[str, Any]:
    """The ``KUBERNETES_EXEC_INFO`` the plugin is given: the cluster when it asks for it."""
    spec: dict[str, Any] = {"interactive": False}
    if access.provider.provide_cluster_info:
        cluster = {k: v for k, v in access.cluster.items() if k != "extensions"}
        for ext in items(access.cluster, "extensions"):
            if ext.get("name") == cp.EXEC_EXTENSION:
                cluster["config"] = ext.get("extension")
        spec["cluster"] = cluster
    return {"apiVersion": access.provider.api_version, "kind": "ExecCredential", "spec": spec}


def parse_credential(output: bytes, api_version: str) -> Credential:
    """The ExecCredential a plugin printed; raises ProfileProblem (CredentialsFailed)."""

    def failed(why: str) -> ProfileProblem:
        return ProfileProblem(REASON_CREDENTIALS_FAILED, f"credentials plugin output {why}")

    try:
        doc = json.loads(output)
    except ValueError:
        raise failed("is not JSON") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
        raise failed("is not an ExecCredential")
    if doc.get("apiVersion") != api_version:
        raise failed(f"has apiVersion {doc.get('apiVersion')!r}, expected {api_version!r}")
    status = at(doc, "status")
    token = status.get("token")
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if bool(cert) != bool(key):
        raise failed("has a client certificate without its key, or a key without its certificate")
    if not token and not cert:
        raise failed("has neither a token nor a client certificate")
    expires = None
    if status.get("expirationTimestamp"):
        try:
            expires = dt.datetime.fromisoformat(str(status["expirationTimestamp"]))
        except ValueError:
            raise failed("has an expirationTimestamp that is not RFC 3339") from None
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=dt.UTC)
    return Credential(
        token=str(token) if token else None,
        certificate=str(cert) if cert else None,
        key=str(key) if key else None,
        expires=expires,
    )


def kubeconfig_text(name: str, access: Access, credential: Credential) -> str:
    """An inline kubeconfig for the endpoint and credential, for kubeconfig.check and the
    connection: the same rules as a Secret's kubeconfig from here on."""
    cluster = {k: v for k, v in access.cluster.items() if k != "extensions"}
    user: dict[str, Any] = {}
    if credential.token:
        user["token"] = credential.token
    if credential.certificate and credential.key:
        user["client-certificate-data"] = base64.b64encode(credential.certificate.encode()).decode()
        user["client-key-data"] = base64.b64encode(credential.key.encode()).decode()
    config = kubeconfig.single(cluster, user, cluster_name=name, user_name=name, context=name)
    return yaml.safe_dump(config)


def check_endpoint(name: str, access: Access) -> None:
    """The endpoint passes kubeconfig.py's rules for a cluster entry, before any plugin runs;
    raises ProfileProblem (BadClusterProfile) naming the rule."""
    probe = kubeconfig_text(name, access, Credential(token="probe"))
    try:
        kubeconfig.check(probe)
    except kubeconfig.KubeconfigRejected as err:
        raise ProfileProblem(REASON_BAD_PROFILE, f"its endpoint is refused: {err}") from None
