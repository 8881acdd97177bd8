"""Credentials that expire safely: a worker registered with a ServiceAccount token that runs
out soon is flagged ahead of time (the MultiKueueCluster's kfed.io/CredentialsExpiring
condition, a Warning Event, the metric and the dashboard row), and ``kfed cluster rotate``
mints the next token on the worker with the current one and puts it into the Secret; the
running manager reconnects with it, the warning clears, nothing restarts."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.cli.main import main
from manager.cli.rotation import request_token
from manager.cli.workerobjects import multikueue_cluster
from manager.controllers import conditions
from manager.federation.workers import credentials
from manager.kube import errors
from manager.kube import resources as R
from manager.observability.clusterrows import cluster_rows
from tests.integration.eventlog import wait_for_story
from tests.integration.federation.bed import NAMESPACE, Bed, proxied_kubeconfig

pytestmark = pytest.mark.full
CLUSTER = "rotating"
ACCOUNT = "kfed-rotation-test"
WORKER = "worker-3"


def condition_of(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return conditions.find(((obj or {}).get("status") or {}).get("conditions"), kind)


@pytest.fixture
async def account(bed: Bed) -> AsyncIterator[str]:
    """A ServiceAccount on worker-3 the manager may act as (bound to cluster-admin: the test
    is about its token, not its rights); yields a 10-minute token for it."""
    worker = bed.worker_apis[WORKER]
    with contextlib.suppress(errors.AlreadyExists):
        await worker.create(R.NAMESPACES, {"metadata": {"name": NAMESPACE}})
    await worker.create(R.SERVICE_ACCOUNTS, {"metadata": {"name": ACCOUNT}}, NAMESPACE)
    rbac = "rbac.authorization.k8s.io"
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": ACCOUNT},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
    }
    await worker.create(CLUSTER_ROLE_BINDINGS, binding)
    token, _ = await request_token(worker, (NAMESPACE, ACCOUNT), 600)
    try:
        yield token
    finally:
        await worker.delete(CLUSTER_ROLE_BINDINGS, ACCOUNT)
        await worker.delete(R.SERVICE_ACCOUNTS, ACCOUNT, NAMESPACE)


CLUSTER_ROLE_BINDINGS = R.Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)


def token_kubeconfig(bed: Bed, token: str) -> str:
    config = yaml.safe_load(proxied_kubeconfig(bed.fed, WORKER, bed.proxies[WORKER]))
    config["users"][0]["user"] = {"token": token}
    return yaml.safe_dump(config)


async def test_an_expiring_token_is_flagged_and_rotated_without_a_restart(
    bed: Bed, account: str
) -> None:
    api = bed.manager_api
    secret = {
        "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
        "data": {"kubeconfig": base64.b64encode(token_kubeconfig(bed, account).encode()).decode()},
    }
    await api.create(R.SECRETS, secret, NAMESPACE)
    await api.create(R.MULTIKUEUE_CLUSTERS, multikueue_cluster(CLUSTER, secret=CLUSTER))
    try:
        # Warned an hour ahead: the 10-minute token is flagged at once.
        bed.settings = dataclasses.replace(bed.settings, credentials_warning=3600.0)
        controller = await bed.start_manager()

        async def flagged(reason: str) -> dict[str, Any] | None:
            mk = await api.get(R.MULTIKUEUE_CLUSTERS, CLUSTER)
            active, expiring = condition_of(mk, C.ACTIVE), condition_of(mk, C.CREDENTIALS_EXPIRING)
            ok = active is not None and active["status"] == "True"
            return mk if ok and expiring is not None and expiring["reason"] == reason else None

        mk = await wait_for(
            lambda: flagged(C.REASON_CREDENTIALS_EXPIRING), timeout=30, what="flagged expiring"
        )
        expiring = condition_of(mk, C.CREDENTIALS_EXPIRING)
        assert expiring is not None and expiring["status"] == "True"
        assert "token of rotating's kubeconfig expires at" in expiring["message"]
        assert "kfed cluster rotate rotating" in expiring["message"]
        await wait_for_story(api, "default", "MultiKueueCluster", CLUSTER, ["CredentialsExpiring"])
        (row,) = [r for r in cluster_rows(controller) if r.name == CLUSTER]
        assert row.credentials_expiring and row.credentials_expire_at is not None
        first = controller.registry.remote(CLUSTER)

        runner = CliRunner()
        args = ["cluster", "rotate", CLUSTER, "--duration", "2h", "--namespace", NAMESPACE,
                "--kubeconfig", str(bed.fed.kubeconfig("manager"))]  # fmt: skip
        result = await asyncio.to_thread(runner.invoke, main, args)
        assert result.exit_code == 0, result.output
        assert f"new token for ServiceAccount {NAMESPACE}/{ACCOUNT}, valid until" in result.output

        stored = await api.get(R.SECRETS, CLUSTER, NAMESPACE)
        config = yaml.safe_load(base64.b64decode(stored["data"]["kubeconfig"]))
        new_token = config["users"][0]["user"]["token"]
        assert new_token != account
        new_expiry = credentials.token_expiry(new_token)
        assert new_expiry is not None and new_expiry.service_account == (NAMESPACE, ACCOUNT)

        mk = await wait_for(
            lambda: flagged(C.REASON_CREDENTIALS_VALID), timeout=30, what="the warning cleared"
        )
        assert condition_of(mk, C.CREDENTIALS_EXPIRING)["status"] == "False"  # type: ignore[index]
        assert controller.registry.remote(CLUSTER) is not first, "reconnected with the new token"
        assert bed.tasks["manager"].done() is False, "the same manager, still running"
    finally:
        with contextlib.suppress(errors.KubeError):
            await api.delete(R.MULTIKUEUE_CLUSTERS, CLUSTER)
        await api.delete(R.SECRETS, CLUSTER, NAMESPACE)
