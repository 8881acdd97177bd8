"""Secure metrics (``--metrics-secure``) against a real kube-apiserver (the lite manager
cluster): the observability server runs as a ServiceAccount bound only to deploy/'s
ClusterRole ``kfed-metrics-auth`` (TokenReview and SubjectAccessReview create), and is read
with ServiceAccount tokens, one bound to ``kfed-metrics-reader``, one to nothing. The roles
are deploy/observability/metrics-access/roles.yaml's, renamed for this test (they are
cluster-wide; other tests may apply the originals).

As controller-runtime's filter answers: no token or one kube-apiserver does not accept, 401;
a user not allowed to get /metrics, 403; allowed, 200. /healthz and /readyz answer without a
token (the kubelet's probes). A process that may not create reviews answers 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from e2e.local.cluster import LocalCluster
from e2e.local.federation import LocalFederation
from e2e.local.ports import free_ports
from e2e.waiting import wait_for
from manager.kube.api import KubeApi
from manager.kube.resources import Resource
from manager.observability.secureflags import secure_serving_from
from manager.observability.server import ObservabilityServer
from tests.unit.observability.test_server import Source
from worker_shim import main as shim_main

pytestmark = pytest.mark.integration

ROLES = Path(__file__).resolve().parents[3] / "deploy/observability/metrics-access/roles.yaml"


@dataclass
class Accounts:
    namespace: str
    cluster: LocalCluster
    tokens: dict[str, str]
    """ServiceAccount name -> a token of it: kfed (the process), reader, stranger."""
    role: dict[str, str]
    """deploy/'s ClusterRole name -> this test's copy."""

    def kubeconfig(self, account: str) -> dict[str, Any]:
        admin = yaml.safe_load(self.cluster.kubeconfig.read_text())
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": admin["clusters"],
            "users": [{"name": account, "user": {"token": self.tokens[account]}}],
            "contexts": [
                {
                    "name": account,
                    "context": {"cluster": admin["clusters"][0]["name"], "user": account},
                }
            ],
            "current-context": account,
        }


def cluster_roles(prefix: str) -> list[dict[str, Any]]:
    roles = [d for d in yaml.safe_load_all(ROLES.read_text()) if d and d["kind"] == "ClusterRole"]
    for role in roles:
        role["metadata"]["name"] = prefix + role["metadata"]["name"]
    return roles


def binding(name: str, role: str, namespace: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


@pytest.fixture
def accounts(lite_clusters: LocalFederation, unique: str) -> Iterator[Accounts]:
    cluster = lite_clusters.cluster("manager")
    namespace, prefix = f"ma-{unique}", f"ma-{unique}-"
    roles = cluster_roles(prefix)
    role = {r["metadata"]["name"].removeprefix(prefix): r["metadata"]["name"] for r in roles}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        *roles,
        binding(f"{prefix}kfed", role["kfed-metrics-auth"], namespace, "kfed"),
        binding(f"{prefix}reader", role["kfed-metrics-reader"], namespace, "reader"),
        binding(f"{prefix}viewer", role["kfed-dashboard-viewer"], namespace, "reader"),
    ]
    for account in ("kfed", "reader", "stranger", "unreviewing"):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": namespace},
            }
        )
    cluster.apply_objects(objects, field_manager="kfed-metrics-access-test")
    try:
        tokens = {
            account: cluster.kubectl(
                "create", "token", account, "-n", namespace, "--duration=1h"
            ).stdout.strip()
            for account in ("kfed", "reader", "stranger", "unreviewing")
        }
        yield Accounts(namespace, cluster, tokens, role)
    finally:
        cluster.kubectl(
            "delete", "clusterrole,clusterrolebinding", "--ignore-not-found", "--wait=false",
            *[o["metadata"]["name"] for o in objects if o["kind"].startswith("ClusterRole")],
            check=False,
        )  # fmt: skip
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@contextlib.asynccontextmanager
async def secure_server(accounts: Accounts, account: str) -> AsyncIterator[ObservabilityServer]:
    """A shim's observability server as ``--metrics-secure`` builds it, its reviews made as
    ServiceAccount ``account``."""
    args = shim_main.parse_args(["--kubeconfig", "unused", "--metrics-secure", "--metrics-port=0"])
    api = await KubeApi.from_kubeconfig_dict(accounts.kubeconfig(account), name=account)
    try:
        server = ObservabilityServer(
            Source(), args.metrics_host, 0, secure=secure_serving_from(args, api)
        )
        async with server:
            yield server
    finally:
        await api.close()


async def get(server: ObservabilityServer, path: str, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(server.url + path, headers=headers, ssl=False) as response,
    ):
        return response.status, await response.text()


async def test_a_token_allowed_to_get_metrics_reads_them(accounts: Accounts) -> None:
    async with secure_server(accounts, "kfed") as server:
        status, body = await get(server, "/metrics", accounts.tokens["reader"])

    assert server.url.startswith("https://127.0.0.1:")
    assert status == 200
    assert 'kfed_leader{identity="replica-a"} 1.0' in body


async def test_no_token_or_a_bad_one_is_unauthorized(accounts: Accounts) -> None:
    forged = accounts.tokens["reader"][:-4] + "AAAA"
    async with secure_server(accounts, "kfed") as server:
        assert (await get(server, "/metrics", None))[0] == 401
        assert (await get(server, "/metrics", "not-a-token"))[0] == 401
        assert (await get(server, "/metrics", forged))[0] == 401
        assert (await get(server, "/dashboard/state.json", None))[0] == 401


async def test_a_token_without_the_reader_role_is_forbidden(accounts: Accounts) -> None:
    async with secure_server(accounts, "kfed") as server:
        status, body = await get(server, "/metrics", accounts.tokens["stranger"])
        dashboard = await get(server, "/dashboard/state.json", accounts.tokens["stranger"])

    assert status == 403
    assert (
        body
        == f"Authorization denied for user system:serviceaccount:{accounts.namespace}:stranger\n"
    )
    assert dashboard[0] == 403


async def test_each_path_is_authorized_on_its_own(accounts: Accounts) -> None:
    """The reader may get /metrics and (kfed-dashboard-viewer) the dashboard, but not a path
    neither role names."""
    async with secure_server(accounts, "kfed") as server:
        assert (await get(server, "/dashboard/state.json", accounts.tokens["reader"]))[0] == 200
        assert (await get(server, "/dashboard/history.json", accounts.tokens["reader"]))[0] == 200
        visibility = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/q/pendingworkloads"
        assert (await get(server, visibility, accounts.tokens["reader"]))[0] == 403


async def test_health_probes_answer_without_a_token(accounts: Accounts) -> None:
    async with secure_server(accounts, "kfed") as server:
        assert (await get(server, "/healthz", None)) == (200, "ok\n")
        assert (await get(server, "/readyz", None))[0] == 503, "the source is not ready"


async def test_answers_are_cached_as_controller_runtime_caches_them(accounts: Accounts) -> None:
    async with secure_server(accounts, "kfed") as server:
        assert server.secure is not None
        access = server.secure.access
        for _ in range(3):
            assert (await get(server, "/metrics", accounts.tokens["reader"]))[0] == 200
            assert (await get(server, "/metrics", accounts.tokens["stranger"]))[0] == 403
        assert access.reviews == 4, "one TokenReview and one SubjectAccessReview per token"

        later = time.monotonic() + 31.0
        access.clock = lambda: later  # denials expired (30 s), tokens (60 s) and allowed not
        assert (await get(server, "/metrics", accounts.tokens["stranger"]))[0] == 403
        assert (await get(server, "/metrics", accounts.tokens["reader"]))[0] == 200
        assert access.reviews == 5, "only the stranger's denial was asked again"


async def test_a_process_that_may_not_create_reviews_answers_500(accounts: Accounts) -> None:
    async with secure_server(accounts, "unreviewing") as server:
        status, body = await get(server, "/metrics", accounts.tokens["reader"])

    assert (status, body) == (500, "Authentication failed\n")


async def test_the_process_needs_only_the_auth_role(accounts: Accounts) -> None:
    """What kfed-metrics-auth grants is what the reviews need, and nothing to read."""
    api = await KubeApi.from_kubeconfig_dict(accounts.kubeconfig("kfed"), name="kfed")
    try:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets"}},
        }
        self_review = Resource(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            False,
        )
        answer = await api.create(self_review, review)
    finally:
        await api.close()

    assert answer["status"]["allowed"] is False


async def test_the_worker_shim_process_serves_securely_with_its_flag(
    kueue_crds: LocalFederation, accounts: Accounts
) -> None:
    """``python -m worker_shim --metrics-secure``: the flag reaches the server (the manager's
    main wires it the same way, secureflags.py)."""
    (port,) = free_ports(1)
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "worker_shim", "--kubeconfig", str(accounts.cluster.kubeconfig)),
        *("--no-fencing", "--metrics-secure", "--metrics-port", str(port)),
        *("--log-level", "WARNING"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"https://127.0.0.1:{port}"

    async def status(path: str, token: str | None = None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            aiohttp.ClientSession() as session,
            session.get(url + path, headers=headers, ssl=False) as response,
        ):
            return response.status

    try:
        await wait_for(
            lambda: status("/healthz"),
            timeout=60,
            what="the shim's secure port answers",
            ignore=(aiohttp.ClientError,),
        )
        assert await status("/metrics") == 401
        assert await status("/metrics", accounts.tokens["stranger"]) == 403
        assert await status("/metrics", accounts.tokens["reader"]) == 200
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
