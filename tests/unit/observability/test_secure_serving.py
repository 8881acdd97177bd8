"""The secure observability port without a cluster: its certificate (generated, or from a
directory and swapped when the files change, never for a half-written pair), the flags'
usage errors, what a SubjectAccessReview is asked, and the secure port's answers that need
no review (the probes open, 401 without a token, 500 when kube-apiserver cannot be asked).
Tokens and reviews against a real kube-apiserver: tests/integration/kube/test_metrics_access.py."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from kubernetes_asyncio.client import ApiClient, Configuration

from e2e.waiting import wait_for
from manager import main as manager_main
from manager.federation.webhooks import certs
from manager.kube.api import KubeApi
from manager.observability.access import DelegatedAccess, review_attributes, user_of
from manager.observability.secureflags import secure_serving_problem, serving_hosts
from manager.observability.server import ObservabilityServer, SecureServing
from manager.observability.servingtls import ServingTLS
from tests.unit.observability.test_server import Source
from worker_shim import main as shim_main


def write_pair(directory: Path, common_name: str) -> None:
    certs.generate_serving_certificate(["127.0.0.1"], common_name=common_name).write(directory)


async def served_common_name(port: int) -> str:
    """The common name of the certificate a new TLS connection to ``port`` is shown."""
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()
    cert = x509.load_der_x509_certificate(der)
    (name,) = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(name.value)


@contextlib.asynccontextmanager
async def serve(tls: ServingTLS) -> AsyncIterator[int]:
    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context).start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


@pytest.fixture
def cert_dir(tmp_path: Path) -> Path:
    write_pair(tmp_path, "first")
    return tmp_path


async def test_a_renewed_pair_is_served_from_the_next_connection_on(cert_dir: Path) -> None:
    tls = ServingTLS.from_cert_dir(cert_dir, reload_period=0.05)
    watcher = asyncio.create_task(tls.watch())
    try:
        async with serve(tls) as port:
            assert await served_common_name(port) == "first"

            write_pair(cert_dir, "renewed")

            async def renewed() -> bool:
                return await served_common_name(port) == "renewed"

            await wait_for(renewed, timeout=10, what="the renewed certificate served")
            assert tls.reloads == 1
    finally:
        watcher.cancel()


async def test_a_half_written_pair_is_not_served_and_the_old_one_stays(
    cert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tls = ServingTLS.from_cert_dir(cert_dir, reload_period=3600)
    other = tmp_path_factory.mktemp("other")
    write_pair(other, "renewed")
    # The certificate swapped, its key not yet: they do not belong together.
    (cert_dir / certs.CERT_FILE).write_bytes((other / certs.CERT_FILE).read_bytes())

    assert tls.reload_if_changed() is False
    async with serve(tls) as port:
        assert await served_common_name(port) == "first"

        (cert_dir / certs.KEY_FILE).write_bytes((other / certs.KEY_FILE).read_bytes())
        assert tls.reload_if_changed() is True
        assert await served_common_name(port) == "renewed"


async def test_without_a_directory_a_certificate_is_generated_for_this_process() -> None:
    tls = ServingTLS.self_signed(serving_hosts("0.0.0.0"))

    async with serve(tls) as port:
        assert await served_common_name(port) == "kfed-metrics"
    assert tls.reload_if_changed() is False


def test_the_generated_certificate_names_loopback_and_the_listening_address() -> None:
    assert {"localhost", "127.0.0.1", "10.0.0.7"} <= set(serving_hosts("10.0.0.7"))
    assert "0.0.0.0" not in serving_hosts("0.0.0.0")


# -- flags -----------------------------------------------------------------------------------


@pytest.mark.parametrize("parse", [manager_main.parse_args, shim_main.parse_args])
def test_a_cert_dir_without_metrics_secure_is_a_usage_error(
    parse: object, cert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(["--kubeconfig", "k", "--metrics-cert-dir", str(cert_dir)])  # type: ignore[operator]

    assert exit_info.value.code == 2
    assert "--metrics-cert-dir needs --metrics-secure" in capsys.readouterr().err


@pytest.mark.parametrize("parse", [manager_main.parse_args, shim_main.parse_args])
def test_a_cert_dir_without_its_key_is_a_usage_error_naming_the_file(
    parse: object, cert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cert_dir / certs.KEY_FILE).unlink()
    argv = ["--kubeconfig", "k", "--metrics-secure", "--metrics-cert-dir", str(cert_dir)]

    with pytest.raises(SystemExit):
        parse(argv)  # type: ignore[operator]

    assert f"{cert_dir} has no tls.key" in capsys.readouterr().err


def test_a_pair_that_does_not_belong_together_is_refused(
    cert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("other")
    write_pair(other, "other")
    (cert_dir / certs.KEY_FILE).write_bytes((other / certs.KEY_FILE).read_bytes())
    args = argparse.Namespace(metrics_secure=True, metrics_cert_dir=cert_dir)

    problem = secure_serving_problem(args)

    assert problem is not None
    assert problem.startswith(f"--metrics-cert-dir: cannot serve with {cert_dir}'s tls.crt")


def test_metrics_secure_alone_and_plain_http_are_both_fine(cert_dir: Path) -> None:
    args = shim_main.parse_args(["--kubeconfig", "k", "--metrics-secure"])
    assert args.metrics_secure and args.metrics_cert_dir is None
    assert shim_main.parse_args(["--kubeconfig", "k"]).metrics_secure is False
    with_dir = ["--kubeconfig", "k", "--metrics-secure", "--metrics-cert-dir", str(cert_dir)]
    assert manager_main.parse_args(with_dir).metrics_cert_dir == cert_dir


# -- what is reviewed -------------------------------------------------------------------------


def test_metrics_are_reviewed_as_a_non_resource_url_with_the_method_as_verb() -> None:
    assert review_attributes("/metrics", "GET") == {
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}
    }
    assert review_attributes("/dashboard/state.json", "HEAD") == {
        "nonResourceAttributes": {"path": "/dashboard/state.json", "verb": "head"}
    }


def test_pending_workloads_are_reviewed_as_the_resource_the_aggregated_api_serves() -> None:
    path = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ml/localqueues/q/pendingworkloads"

    assert review_attributes(path, "GET") == {
        "resourceAttributes": {
            "group": "visibility.kueue.x-k8s.io",
            "version": "v1beta2",
            "resource": "localqueues",
            "subresource": "pendingworkloads",
            "name": "q",
            "verb": "get",
            "namespace": "ml",
        }
    }


def test_a_token_review_names_the_user_with_groups_uid_and_extra() -> None:
    review = {
        "status": {
            "authenticated": True,
            "user": {
                "username": "system:serviceaccount:monitoring:prometheus",
                "uid": "u-1",
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
            },
        }
    }

    user = user_of(review)

    assert user is not None
    assert user.name == "system:serviceaccount:monitoring:prometheus"
    assert user.uid == "u-1"
    assert user.groups == ("system:serviceaccounts", "system:authenticated")
    assert user.extra == (("authentication.kubernetes.io/pod-name", ("prometheus-0",)),)
    assert user_of({"status": {"authenticated": False, "error": "invalid bearer token"}}) is None
    assert user_of({}) is None


# -- the secure port, before any review --------------------------------------------------------


@contextlib.asynccontextmanager
async def secure_server() -> AsyncIterator[ObservabilityServer]:
    """A secure server whose kube-apiserver is away (nothing listens on its port): what
    needs no review still answers."""
    configuration = Configuration(host=f"https://127.0.0.1:{closed_port()}")
    api = KubeApi(ApiClient(configuration), name="away")
    secure = SecureServing(ServingTLS.self_signed(["127.0.0.1"]), DelegatedAccess(api))
    try:
        async with ObservabilityServer(Source(), "127.0.0.1", 0, secure=secure) as server:
            yield server
    finally:
        await api.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def fetch(server: ObservabilityServer, path: str, token: str = "") -> aiohttp.ClientResponse:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        response = await session.get(server.url + path, headers=headers, ssl=False)
        await response.read()
        return response


async def test_the_secure_port_is_tls_and_asks_for_a_token_except_for_the_probes() -> None:
    async with secure_server() as server:
        assert server.url.startswith("https://127.0.0.1:")
        assert (await fetch(server, "/healthz")).status == 200
        assert (await fetch(server, "/readyz")).status == 503, "answered: not ready yet"
        for path in ("/metrics", "/dashboard/state.json", "/"):
            response = await fetch(server, path)
            assert response.status == 401, path
            assert response.headers["WWW-Authenticate"] == "Bearer"


async def test_a_token_that_cannot_be_reviewed_is_a_server_error() -> None:
    async with secure_server() as server:
        response = await fetch(server, "/metrics", token="some-token")

        assert response.status == 500
        assert await response.text() == "Authentication failed\n"
        assert server.secure is not None and server.secure.access.reviews == 1
