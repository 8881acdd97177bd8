"""Kueue's visibility API through kube-apiserver's aggregation, as deploy/manager sets it
up: the APIServices of deploy/manager/base/visibility.yaml applied unchanged, kube-apiserver
proxying to the manager's TLS port with its front-proxy certificate, callers authorized by
SubjectAccessReview. ``kubectl get --raw`` and ``kfed workloads`` read positions as they do
with upstream Kueue."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for
from manager.cli.main import main
from manager.controllers.state import ClusterState
from manager.federation import visibility
from manager.federation.webhooks import certs
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.observability.aggregated import AggregatedVisibilityServer
from tests import builders as shared
from tests.integration.controllers import builders
from tests.integration.controllers.conftest import StartController, create_cluster_scoped

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
VISIBILITY_YAML = REPO / "deploy" / "manager" / "base" / "visibility.yaml"
APISERVICES = R.Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", False)
SERVICES = R.Resource("", "v1", "services", "Service", True)
ENDPOINTS = R.Resource("", "v1", "endpoints", "Endpoints", True)
CLUSTER_ROLES = R.Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
ROLE_BINDINGS = R.Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True)
ENDPOINT_SLICES = R.Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
NS = "kueue-system"


def host_address() -> str:
    """An address of this machine other than loopback: kube-apiserver refuses loopback
    endpoints, and reaches a Service's endpoint directly (--enable-aggregator-routing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # no packet is sent: only a route is chosen
            address = str(probe.getsockname()[0])
        except OSError:
            address = ""
    if not address or address.startswith("127."):
        pytest.skip("no non-loopback IPv4 address on this machine for an endpoint")
    return address


def workload(namespace: str, name: str) -> dict[str, Any]:
    main = shared.pod_set(requests={"nvidia.com/gpu": 1})
    return shared.workload(name, namespace=namespace, queue="lq", pod_sets=[main])


@pytest.fixture
async def served(
    api: KubeApi, tmp_path: Path, start_controller: StartController
) -> AsyncIterator[tuple[ClusterState, AggregatedVisibilityServer]]:
    """The manager's aggregated visibility server, registered as deploy/ registers it."""
    address = host_address()
    running = await start_controller()
    state = running.controller.state
    certs.write_serving_certificate(tmp_path, [address])
    server = AggregatedVisibilityServer(api, lambda: (state, "synced"), address, 0, tmp_path)
    await server.start()
    apiservices = [
        d for d in yaml.safe_load_all(VISIBILITY_YAML.read_text()) if d["kind"] == "APIService"
    ]
    assert {a["spec"]["service"]["port"] for a in apiservices} == {8082}
    service = {
        "metadata": {"name": "kfed-manager", "namespace": NS},
        "spec": {"ports": [{"port": 8082, "name": "visibility"}]},
    }
    endpoints = {
        "metadata": {"name": "kfed-manager", "namespace": NS},
        "subsets": [
            {"addresses": [{"ip": address}], "ports": [{"port": server.port, "name": "visibility"}]}
        ],
    }
    slice_ = {
        "metadata": {
            "name": "kfed-manager-visibility",
            "namespace": NS,
            "labels": {
                "kubernetes.io/service-name": "kfed-manager",
                "endpointslice.kubernetes.io/managed-by": "kfed-tests",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"port": server.port, "name": "visibility", "protocol": "TCP"}],
    }
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(R.NAMESPACES, {"metadata": {"name": NS}})
    created: list[tuple[R.Resource, str, str | None]] = []
    try:
        objects: list[tuple[R.Resource, dict[str, Any]]] = [
            (SERVICES, service),
            (ENDPOINTS, endpoints),
            (ENDPOINT_SLICES, slice_),
        ]
        for res, body in objects:
            await api.create(res, body, NS)
            created.append((res, body["metadata"]["name"], NS))
        for body in apiservices:
            await api.create(APISERVICES, body)
            created.append((APISERVICES, body["metadata"]["name"], None))
        yield state, server
    finally:
        # An APIService left unavailable would break discovery for every later test.
        for res, name, namespace in reversed(created):
            with contextlib.suppress(errors.NotFound):
                await api.delete(res, name, namespace)
        await server.stop()


async def available(api: KubeApi, name: str) -> bool:
    status = (await api.get(APISERVICES, name)).get("status") or {}
    return any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def raw(cluster: LocalCluster, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl in a thread: the server answering it runs on this event loop."""
    return await asyncio.to_thread(cluster.kubectl, "get", "--raw", path, *args, check=False)


async def test_kubectl_and_kfed_read_positions_through_the_apiservice(
    single_cluster: LocalCluster,
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[tuple[R.Resource, str]],
    served: tuple[ClusterState, AggregatedVisibilityServer],
) -> None:
    cq = f"vis-{unique}"
    await create_cluster_scoped(
        api, R.RESOURCE_FLAVORS, builders.flavor(f"f-{unique}", "none"), cluster_objects
    )
    await create_cluster_scoped(
        api, R.CLUSTER_QUEUES, builders.cluster_queue(cq, f"f-{unique}", gpus=0), cluster_objects
    )
    await api.create(R.LOCAL_QUEUES, builders.local_queue(ns, "lq", cq), ns)
    for name in ("first", "second"):
        await api.create(R.WORKLOADS, workload(ns, name), ns)
    state, _ = served

    async def both_pending() -> bool:
        return len(visibility.positions(state, cq)) == 2

    await wait_for(both_pending, timeout=30, what="two workloads pending in the queue")
    for version in ("v1beta1", "v1beta2"):
        name = f"{version}.visibility.kueue.x-k8s.io"
        await wait_for(
            functools.partial(available, api, name), timeout=60, what=f"{name} Available"
        )

    # The admin (system:masters) may: upstream's document, through kube-apiserver.
    path = f"/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{cq}/pendingworkloads"
    result = await raw(single_cluster, path)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["kind"] == "PendingWorkloadsSummary"
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]] == [
        ("first", 0),
        ("second", 1),
    ]

    # kfed workloads finds the API served and shows the positions, no URL given.
    result_cli = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["--kubeconfig", str(single_cluster.kubeconfig), "workloads", "-n", ns, "-o", "json"],
    )
    assert result_cli.exit_code == 0, result_cli.output
    rows = {r["name"]: r["positionInClusterQueue"] for r in json.loads(result_cli.stdout)}
    assert rows == {"first": 0, "second": 1}

    # Someone without a role is refused by the manager's SubjectAccessReview ...
    someone = f"someone-{unique}"
    lq_path = (
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/lq/pendingworkloads"
    )
    refused = await raw(single_cluster, lq_path, f"--as={someone}")
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
    # ... until granted deploy/'s LocalQueue viewer role in that namespace (only).
    await api.create(
        CLUSTER_ROLES,
        next(
            d
            for d in yaml.safe_load_all(VISIBILITY_YAML.read_text())
            if d["kind"] == "ClusterRole"
            and d["metadata"]["name"] == "kfed-pending-workloads-lq-viewer"
        ),
    )
    cluster_objects.append((CLUSTER_ROLES, "kfed-pending-workloads-lq-viewer"))
    await api.create(
        ROLE_BINDINGS,
        {
            "metadata": {"name": "lq-viewer", "namespace": ns},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "kfed-pending-workloads-lq-viewer",
            },
            "subjects": [
                {"kind": "User", "name": someone, "apiGroup": "rbac.authorization.k8s.io"}
            ],
        },
        ns,
    )

    async def granted() -> bool:
        return (await raw(single_cluster, lq_path, f"--as={someone}")).returncode == 0

    # The manager caches a refusal for a few seconds: granted within that, plus RBAC's own.
    await wait_for(granted, timeout=30, what="the LocalQueue line granted")
    assert (await raw(single_cluster, path, f"--as={someone}")).returncode != 0  # not the CQ
