"""A worker's objects on the manager as ``kfed cluster add`` writes them (registration.py):
its name checked, its kubeconfig checked as the manager checks it and kept in a Secret, the
MultiKueueCluster that points at that Secret, and the Secret a MultiKueueCluster names."""

from __future__ import annotations

import re
from typing import Any

import yaml

from manager.api import constants as C
from manager.api import federated
from manager.cli.common import usage_error
from manager.federation.workers import kubeconfig

Obj = dict[str, Any]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kfed"
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def check_name(name: str) -> None:
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        raise usage_error(
            f"{name!r} is not a valid cluster name: use lower-case letters, digits, '-' and '.'"
        )


def check_worker_kubeconfig(
    text: str, *, context: str | None, source: str
) -> kubeconfig.CheckedKubeconfig:
    """The worker's kubeconfig, validated as the manager will validate it and reduced to one
    context; an unsafe or broken one is refused here, before anything is created."""
    try:
        return kubeconfig.check(text, context=context)
    except kubeconfig.KubeconfigRejected as err:
        hint = ""
        if err.reason == kubeconfig.INSECURE_KUBECONFIG:
            hint = (
                "; the manager only accepts kubeconfigs with inline certificate-authority-data "
                "and inline credentials (token or client certificate data)"
            )
        raise usage_error(f"refusing {source}: {err.reason}: {err}{hint}") from None


def kubeconfig_secret(name: str, namespace: str, checked: kubeconfig.CheckedKubeconfig) -> Obj:
    text = yaml.safe_dump(checked.config, sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        },
        "type": "Opaque",
        "data": kubeconfig.secret_data(text),
    }


def multikueue_cluster(name: str, secret: str) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"location": secret, "locationType": "Secret"}}},
    }


def secret_of(mk_cluster: Obj) -> str | None:
    """The Secret a MultiKueueCluster reads its kubeconfig from (None: not a Secret)."""
    return federated.kubeconfig_source(mk_cluster).secret
