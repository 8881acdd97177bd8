"""Registering the manager's Job webhook with kube-apiserver.

The MutatingWebhookConfiguration is what makes the apiserver call the manager on every Job
creation. Its shape carries two safety decisions:

- ``objectSelector`` requires the ``kueue.x-k8s.io/queue-name`` label, so Jobs that are not
  queued are never even sent to the manager: a manager outage cannot block them;
- ``failurePolicy: Fail``, so a queued Job is rejected (and retried by its submitter) rather
  than created without ``managedBy`` while the manager is down: such a Job would run its pods
  on the manager cluster, and ``managedBy`` cannot be added later.

The manager writes the configuration at start, with the CA bundle of its current serving
certificate; writing it again is harmless (create, or replace when it differs).
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any

from manager.api.constants import QUEUE_NAME_LABEL
from manager.api.view import labels_of
from manager.controllers.jobkinds import registry as jobkinds
from manager.federation.webhooks.webhook import MUTATE_JOB_PATH
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj

log = logging.getLogger(__name__)

DEFAULT_CONFIGURATION_NAME = "kfed-manager"
WEBHOOK_NAME = "mjob.kfed.io"
UPDATE_WEBHOOK_NAME = "ujob.kfed.io"
"""Updates of queued Jobs, checked as upstream checks them (a queue label on a running Job)."""
TIMEOUT_SECONDS = 5
_CONFLICT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class ServiceReference:
    """The in-cluster Service in front of the manager (``clientConfig.service``)."""

    namespace: str
    name: str
    port: int = 443
    path: str = MUTATE_JOB_PATH

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "port": self.port,
            "path": self.path,
        }


def webhook_configuration(
    *,
    name: str = DEFAULT_CONFIGURATION_NAME,
    url: str | None = None,
    service: ServiceReference | None = None,
    ca_bundle: bytes,
    namespace_selector: dict[str, Any] | None = None,
) -> Obj:
    """The MutatingWebhookConfiguration, as written. Exactly one of ``url`` (a manager outside
    the cluster, e.g. the local test bed: ``https://127.0.0.1:PORT/mutate-batch-v1-job``) and
    ``service`` (a manager deployed in the cluster) says where the apiserver calls.

    Fields the apiserver would default are spelled out, so that the stored object equals this
    one and an unchanged configuration is not rewritten. ``namespace_selector`` narrows the
    namespaces (default: all), e.g. to keep a test's webhook out of other tests' way.
    """
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url and service")
    if not ca_bundle:
        raise ValueError("ca_bundle is empty: the apiserver could not verify the webhook")
    client_config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if url is not None:
        client_config["url"] = url
    elif service is not None:
        client_config["service"] = service.as_dict()

    def webhook(name: str, operation: str, failure_policy: str) -> dict[str, Any]:
        return {
            "name": name,
            "clientConfig": client_config,
            "rules": [
                {
                    "operations": [operation],
                    "apiGroups": [kind.resource.group],
                    "apiVersions": [kind.resource.version],
                    "resources": [kind.resource.plural],
                    "scope": "Namespaced",
                }
                for kind in jobkinds.KINDS.values()
            ],
            "objectSelector": {
                "matchExpressions": [{"key": QUEUE_NAME_LABEL, "operator": "Exists"}],
            },
            "namespaceSelector": namespace_selector or {},
            "failurePolicy": failure_policy,
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": TIMEOUT_SECONDS,
        }

    # Creation fails closed: a queued Job created without managedBy must not slip through.
    # Updates fail open: their checks only repeat upstream's refusals (the dispatcher never
    # federates a Job without managedBy anyway), and kfed's own controllers update queued
    # Jobs, which must not depend on every replica serving the webhook.
    webhooks = [
        webhook(WEBHOOK_NAME, "CREATE", "Fail"),
        webhook(UPDATE_WEBHOOK_NAME, "UPDATE", "Ignore"),
    ]
    return {
        "apiVersion": R.MUTATING_WEBHOOKS.api_version,
        "kind": R.MUTATING_WEBHOOKS.kind,
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kfed"}},
        "webhooks": webhooks,
    }


async def ensure_webhook_configuration(
    api: KubeApi,
    *,
    name: str = DEFAULT_CONFIGURATION_NAME,
    url: str | None = None,
    service: ServiceReference | None = None,
    ca_bundle: bytes,
    namespace_selector: dict[str, Any] | None = None,
) -> Obj:
    """Create the configuration, or replace it when it differs; return the stored object."""
    desired = webhook_configuration(
        name=name,
        url=url,
        service=service,
        ca_bundle=ca_bundle,
        namespace_selector=namespace_selector,
    )
    for _ in range(_CONFLICT_RETRIES):
        try:
            current = await api.get(R.MUTATING_WEBHOOKS, name)
        except errors.NotFound:
            try:
                created = await api.create(R.MUTATING_WEBHOOKS, desired)
            except errors.AlreadyExists:
                continue  # someone else created it meanwhile: compare with theirs
            log.info("created MutatingWebhookConfiguration %s", name)
            return created
        if _same(current, desired):
            return current
        replacement = {
            **desired,
            "metadata": {
                **current["metadata"],
                "labels": {
                    **labels_of(current),
                    **desired["metadata"]["labels"],
                },
            },
        }
        try:
            replaced = await api.replace(R.MUTATING_WEBHOOKS, replacement)
        except errors.Conflict:
            continue  # changed since we read it: read again
        log.info("updated MutatingWebhookConfiguration %s", name)
        return replaced
    raise errors.Conflict(
        409, "Conflict", f"MutatingWebhookConfiguration {name} kept changing while being written"
    )


async def delete_webhook_configuration(
    api: KubeApi, name: str = DEFAULT_CONFIGURATION_NAME
) -> bool:
    """Remove the configuration (False when it was not there): without it, queued Jobs are
    created unmutated, so only do this when no MultiKueue queue is in use on the cluster."""
    return await api.delete(R.MUTATING_WEBHOOKS, name)


def _same(current: Obj, desired: Obj) -> bool:
    labels = labels_of(current)
    wanted_labels = desired["metadata"]["labels"]
    return bool(
        current.get("webhooks") == desired["webhooks"]
        and all(labels.get(k) == v for k, v in wanted_labels.items())
    )
