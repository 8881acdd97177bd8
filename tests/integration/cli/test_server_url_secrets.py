"""A token in a worker's server URL (`https://host:6443/?token=...`), stored before kfed refused
such URLs, is shown nowhere: not in `kfed cluster list` (also from a condition an older manager
wrote), not in the condition a running manager writes, not on its dashboard. On the lite
manager apiserver, with an in-process kfed manager for the second part."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

import pytest
import yaml
from click.testing import Result

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.cli.clusterstatus import active_condition
from manager.cli.workerobjects import multikueue_cluster
from manager.controllers.settings import ControllerSettings
from manager.federation.runtime import FederationController
from manager.federation.settings import FederationSettings
from manager.federation.workers import kubeconfig
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.observability.clusterrows import cluster_rows
from tests.integration.cli.conftest import Cleanup, Kfed, Kube

pytestmark = pytest.mark.integration

TOKEN = "s3cret-in-the-query-1f2e3d"


def listed(kfed: Kfed) -> str:
    table: Result = kfed("cluster", "list")
    as_json: Result = kfed("cluster", "list", "-o", "json")
    assert table.exit_code == 0 and as_json.exit_code == 0, table.output + as_json.output
    return table.output + as_json.output


def test_an_old_condition_naming_a_server_url_is_listed_redacted(
    kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str
) -> None:
    name = f"old-{unique}"
    manager.create(R.MULTIKUEUE_CLUSTERS, multikueue_cluster(name, name))
    cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)
    manager.patch_status(
        R.MULTIKUEUE_CLUSTERS,
        name,
        {
            "conditions": [
                {
                    "type": C.ACTIVE,
                    "status": "False",
                    "reason": C.REASON_CLIENT_CONNECTION_FAILED,
                    "message": f"{name} https://10.0.0.1:6443/?token={TOKEN}: InvalidURL",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ]
        },
    )

    shown = listed(kfed)

    assert TOKEN not in shown
    row = next(
        r for r in json.loads(kfed("cluster", "list", "-o", "json").stdout) if r["name"] == name
    )
    assert row["message"] == f"{name} https://10.0.0.1:6443/?[redacted] InvalidURL"


async def test_a_stored_token_in_the_server_url_is_refused_and_never_shown(
    kueue_crds: LocalFederation, kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str
) -> None:
    name = f"query-{unique}"
    ns = kfed.namespace  # deleted at the end by the kfed fixture
    config = yaml.safe_load(kueue_crds.kubeconfig("worker-1").read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = entry["cluster"]["server"].rstrip("/") + f"/?token={TOKEN}"
    secret = {
        "metadata": {"name": name, "namespace": ns},
        "data": kubeconfig.secret_data(yaml.safe_dump(config)),
    }
    assert TOKEN in base64.b64decode(secret["data"][C.MULTIKUEUE_KUBECONFIG_SECRET_KEY]).decode()
    cleanup.add(manager, R.SECRETS, name, ns)
    cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)
    async with await KubeApi.from_kubeconfig_file(kueue_crds.kubeconfig("manager")) as api:
        await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
        await api.create(R.SECRETS, secret, ns)
        await api.create(R.MULTIKUEUE_CLUSTERS, multikueue_cluster(name, name))
        controller = FederationController(
            api,
            FederationSettings(namespace=ns, request_timeout=2.0),
            ControllerSettings(status_period=0.2),
        )
        running = asyncio.create_task(controller.run())
        try:

            async def refused() -> dict[str, Any] | None:
                condition = active_condition(await api.get(R.MULTIKUEUE_CLUSTERS, name))
                if condition is not None and condition.get("reason") == "InsecureKubeConfig":
                    return condition
                return None

            condition = await wait_for(refused, timeout=30, what="the manager refusing it")
            assert "query string" in condition["message"]
            assert TOKEN not in json.dumps(condition)
            (row,) = [r for r in cluster_rows(controller) if r.name == name]
            assert TOKEN not in json.dumps(row.to_json())  # the dashboard's state.json
            assert TOKEN not in await asyncio.to_thread(listed, kfed)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
