"""Scenario F: broken and unsafe kubeconfigs each give Active=False with their own reason,
while the manager keeps serving the healthy cluster next to them. Among them, from the issue
"Never twice, never stuck": credentials in the server URL (finding 8: accepted before, never
connected, and removing the cluster then crashed the manager) and the manager cluster
registered as its own worker (finding 7: accepted before, its Workloads deleted and recreated
in a loop)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import conditions
from manager.federation.engine.statuswrites import StatusWrites
from manager.federation.settings import FederationSettings
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import REASON_SAME_CLUSTER
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.events import EventRecorder
from tests.integration.eventlog import wait_for_story


def good(lite: LocalFederation) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(lite.kubeconfig("worker-1").read_text())
    return config


def variant(lite: LocalFederation, change: str) -> str | bytes | None:
    config = good(lite)
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    if change == "not-yaml":
        return "clusters: [unterminated"
    if change == "manager-itself":
        return lite.kubeconfig("manager").read_text()
    if change == "exec":
        user["exec"] = {"command": "/bin/sh", "apiVersion": "client.authentication.k8s.io/v1"}
    elif change == "auth-provider":
        user["auth-provider"] = {"name": "oidc"}
    elif change == "token-file":
        user["tokenFile"] = "/var/run/secrets/token"
    elif change == "ca-path":
        cluster["certificate-authority"] = "/etc/ssl/ca.crt"
    elif change == "skip-tls":
        cluster["insecure-skip-tls-verify"] = True
    elif change == "empty-server":
        cluster["server"] = ""
    elif change == "bad-host":
        cluster["server"] = "https://Not_A_Host:6443"
    elif change == "userinfo":
        cluster["server"] = cluster["server"].replace("https://", "https://admin:s3cret@")
    elif change == "unreachable":
        cluster["server"] = "https://127.0.0.1:1"
    elif change == "wrong-ca":
        cluster["certificate-authority-data"] = good(lite)["users"][0]["user"][
            "client-certificate-data"
        ]
    return yaml.safe_dump(config)


CASES = {
    "not-yaml": C.REASON_BAD_KUBECONFIG,
    "exec": C.REASON_INSECURE_KUBECONFIG,
    "auth-provider": C.REASON_INSECURE_KUBECONFIG,
    "token-file": C.REASON_INSECURE_KUBECONFIG,
    "ca-path": C.REASON_INSECURE_KUBECONFIG,
    "skip-tls": C.REASON_INSECURE_KUBECONFIG,
    "empty-server": C.REASON_BAD_KUBECONFIG,
    "bad-host": C.REASON_BAD_KUBECONFIG,
    "userinfo": C.REASON_INSECURE_KUBECONFIG,
    "unreachable": C.REASON_CLIENT_CONNECTION_FAILED,
    "wrong-ca": C.REASON_CLIENT_CONNECTION_FAILED,
    "manager-itself": REASON_SAME_CLUSTER,
    "no-secret": "SecretNotFound",
    "no-key": C.REASON_BAD_KUBECONFIG,
}


@pytest.fixture
async def manager(kueue_crds: LocalFederation, unique: str) -> AsyncIterator[tuple[KubeApi, str]]:
    ns = f"kfed-{unique}"
    async with await KubeApi.from_kubeconfig_file(kueue_crds.kubeconfig("manager")) as api:
        await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
        yield api, ns
        for name in [*CASES, "healthy"]:
            await api.delete(R.MULTIKUEUE_CLUSTERS, f"{name}-{unique}")
        await api.delete(R.NAMESPACES, ns)


async def test_f_each_broken_kubeconfig_has_its_reason_and_the_rest_keep_working(
    kueue_crds: LocalFederation,
    manager: tuple[KubeApi, str],
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, ns = manager
    caplog.set_level(logging.DEBUG)  # every line kfed logs about these clusters
    for name in [*CASES, "healthy"]:
        text = yaml.safe_dump(good(kueue_crds)) if name == "healthy" else variant(kueue_crds, name)
        secret_name = f"{name}-{unique}"
        if name != "no-secret":
            data = (
                {}
                if name == "no-key"
                else {"kubeconfig": base64.b64encode(str(text).encode()).decode()}
            )
            await api.create(
                R.SECRETS, {"metadata": {"name": secret_name, "namespace": ns}, "data": data}, ns
            )
        await api.create(
            R.MULTIKUEUE_CLUSTERS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "MultiKueueCluster",
                "metadata": {"name": f"{name}-{unique}"},
                "spec": {"clusterSource": {"kubeConfig": {"location": secret_name}}},
            },
        )

    registry = ClusterRegistry(
        api,
        FederationSettings(
            namespace=ns, request_timeout=2.0, reconnect_initial=0.2, reconnect_max=1.0
        ),
        status=StatusWrites(api, EventRecorder(api, component="kfed-manager")),
    )
    task = asyncio.create_task(registry.run())
    events_task = asyncio.create_task(registry.status.events.run())
    try:

        async def reasons() -> dict[str, tuple[str, str]] | None:
            found = {}
            for name in [*CASES, "healthy"]:
                obj = await api.get(R.MULTIKUEUE_CLUSTERS, f"{name}-{unique}")
                c = conditions.find((obj.get("status") or {}).get("conditions"), C.ACTIVE)
                if c is None:
                    return None
                found[name] = (c["status"], c["reason"])
            return (
                found
                if found["healthy"] == ("True", C.REASON_ACTIVE)
                and all(found[n][0] == "False" for n in CASES)
                else None
            )

        found = await wait_for(
            reasons, timeout=60, interval=0.3, what="every cluster's Active condition"
        )
        assert found is not None
        for name, reason in CASES.items():
            assert found[name] == ("False", reason), name
        # The password in the server URL is never repeated: not in a status, not in a log.
        statuses = [await api.get(R.MULTIKUEUE_CLUSTERS, f"{n}-{unique}") for n in CASES]
        assert "s3cret" not in json.dumps(statuses)
        assert "s3cret" not in caplog.text
        # The healthy worker is served: its informers see its objects.
        healthy = registry.remote(f"healthy-{unique}")
        assert healthy is not None and healthy.connected and healthy.synced
        # A fixed Secret is picked up without a restart.
        fixed = base64.b64encode(yaml.safe_dump(good(kueue_crds)).encode()).decode()
        await api.patch(R.SECRETS, f"skip-tls-{unique}", {"data": {"kubeconfig": fixed}}, ns)

        async def recovered() -> bool:
            obj = await api.get(R.MULTIKUEUE_CLUSTERS, f"skip-tls-{unique}")
            return conditions.is_true(obj, C.ACTIVE)

        await wait_for(recovered, timeout=60, what="Active=True once the Secret is fixed")

        # Each worker's fate is an Event on its MultiKueueCluster (#20), with no secret in it.
        expected = {
            "exec": ("Warning", "ClusterRefused"),
            "unreachable": ("Warning", "ClusterUnreachable"),
            "healthy": ("Normal", "ClusterConnected"),
            "skip-tls": ("Normal", "ClusterRecovered"),
        }
        for name, (kind, reason) in expected.items():
            story = await wait_for_story(
                api, "default", "MultiKueueCluster", f"{name}-{unique}", [reason]
            )
            assert next(t for t in story if t.reason == reason).type == kind
        listed = await api.list(R.EVENTS, "default")
        assert "s3cret" not in json.dumps(listed["items"])
    finally:
        events_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await events_task
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
