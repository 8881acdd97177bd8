"""deploy/worker/make-kubeconfig.sh against a real worker apiserver: the kubeconfig it
writes passes kfed's validation and authenticates as the ServiceAccount; bad input and a
missing token controller end in one clear line with nothing left behind. And a Pod's view
of the API (``KubeApi.from_in_cluster``) works from a ServiceAccount token and CA file."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from e2e.local.cluster import LocalCluster
from e2e.local.federation import LocalFederation
from manager.federation.workers import kubeconfig
from manager.kube.api import KubeApi
from tests.integration.deploy.manifests import DEPLOY, kubectl

pytestmark = pytest.mark.integration

SCRIPT = DEPLOY / "worker" / "make-kubeconfig.sh"


def make_kubeconfig(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--kubeconfig", str(cluster.kubeconfig), *args],
        env={**os.environ, "KUBECTL": kubectl()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def worker(lite_clusters: LocalFederation) -> LocalCluster:
    return lite_clusters.cluster("worker-1")


@pytest.fixture
def namespace(worker: LocalCluster, unique: str) -> Iterator[str]:
    name = f"mkcfg-{unique}"
    worker.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        worker.kubectl("delete", "namespace", name, "--wait=false")


def whoami(config: Path) -> str:
    result = subprocess.run(
        [
            kubectl(),
            f"--kubeconfig={config}",
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_the_kubeconfig_passes_kfed_validation_and_is_the_service_account(
    worker: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    out = tmp_path / "worker-1.kubeconfig"

    made = make_kubeconfig(
        worker,
        *("--namespace", namespace, "--service-account", "kfed-manager-remote"),
        *("--name", "worker-1", "--duration", "2h", "--output", str(out)),
    )

    assert made.returncode == 0, made.stderr
    assert f"created ServiceAccount {namespace}/kfed-manager-remote" in made.stderr
    assert "token: TokenRequest, expires" in made.stderr
    assert out.stat().st_mode & 0o077 == 0, "the token is a credential: owner-only file"
    checked = kubeconfig.check(out.read_text())
    assert checked.context == "worker-1"
    assert (
        checked.server
        == yaml.safe_load(worker.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    ), "the admin kubeconfig's server by default"
    user = checked.config["users"][0]["user"]
    assert set(user) == {"token"}
    assert whoami(out) == f"system:serviceaccount:{namespace}:kfed-manager-remote"


def test_an_existing_service_account_is_reused_and_the_server_can_be_overridden(
    worker: LocalCluster, namespace: str
) -> None:
    worker.kubectl("-n", namespace, "create", "serviceaccount", "remote")
    server = yaml.safe_load(worker.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    port = urlsplit(server).port

    made = make_kubeconfig(
        worker,
        *("--namespace", namespace, "--service-account", "remote"),
        *("--server", f"https://localhost:{port}"),
    )

    assert made.returncode == 0, made.stderr
    assert "created ServiceAccount" not in made.stderr
    assert kubeconfig.check(made.stdout).server == f"https://localhost:{port}"


def test_a_missing_namespace_is_one_clear_line_and_creates_nothing(
    worker: LocalCluster, unique: str
) -> None:
    made = make_kubeconfig(worker, "--namespace", f"absent-{unique}")

    assert made.returncode == 1
    assert made.stderr.strip().splitlines() == [
        f"make-kubeconfig.sh: namespace absent-{unique} does not exist: "
        "apply deploy/worker/overlays/default first"
    ]
    assert made.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--name", "Worker_1"), "--name Worker_1 is not a DNS-1123 name"),
        (("--server", "http://10.0.0.1:6443"), "is not an https:// URL"),
        (("--bogus",), "unknown argument: --bogus"),
    ],
)
def test_bad_arguments_are_refused(
    worker: LocalCluster, namespace: str, args: tuple[str, ...], message: str
) -> None:
    made = make_kubeconfig(worker, "--namespace", namespace, *args)

    assert made.returncode == 1
    assert message in made.stderr.strip().splitlines()[-1]
    assert worker.kubectl("-n", namespace, "get", "serviceaccounts", "-o", "name").stdout == ""


def test_a_token_secret_nobody_fills_is_removed_with_a_clear_error(
    worker: LocalCluster, namespace: str
) -> None:
    """Lite clusters run no kube-controller-manager: the legacy token Secret stays empty."""
    made = make_kubeconfig(worker, "--namespace", namespace, "--token-secret", "--secret-wait", "1")

    assert made.returncode == 1
    assert "got no token within 1s: is kube-controller-manager's token controller running?" in (
        made.stderr
    )
    secrets = worker.kubectl("-n", namespace, "get", "secrets", "-o", "name").stdout
    assert "kfed-manager-remote-token" not in secrets


async def test_in_cluster_configuration_uses_the_mounted_token_and_ca(
    worker: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """What kubelet gives a Pod, made by hand: KUBERNETES_SERVICE_HOST/PORT, a token file
    and the cluster CA."""
    worker.kubectl("-n", namespace, "create", "serviceaccount", "pod-identity")
    token = worker.kubectl("-n", namespace, "create", "token", "pod-identity").stdout.strip()
    (tmp_path / "token").write_text(token)
    config = yaml.safe_load(worker.kubeconfig.read_text())
    ca = kubeconfig.check(worker.kubeconfig.read_text()).config["clusters"][0]["cluster"]
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(ca["certificate-authority-data"]))
    server = urlsplit(config["clusters"][0]["cluster"]["server"])

    async with await KubeApi.from_in_cluster(
        token_file=tmp_path / "token",
        ca_file=tmp_path / "ca.crt",
        environ={
            "KUBERNETES_SERVICE_HOST": str(server.hostname),
            "KUBERNETES_SERVICE_PORT": str(server.port),
        },
    ) as api:
        review = await api.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )

    assert review["status"]["userInfo"]["username"] == (
        f"system:serviceaccount:{namespace}:pod-identity"
    )
