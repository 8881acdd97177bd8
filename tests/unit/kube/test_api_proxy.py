"""A KubeApi finds its API server's proxy once, not on every request (see resolve_proxy_once)."""

from __future__ import annotations

import base64

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from manager.kube import errors
from manager.kube.api import KubeApi

SERVER = "https://apiserver.example.test:6443"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")


async def api_for(server: str = SERVER) -> KubeApi:
    configuration = Configuration()
    configuration.host = server
    return KubeApi(ApiClient(configuration), name="unit")


def session_of(api: KubeApi) -> aiohttp.ClientSession:
    session = api.client.rest_client.pool_manager
    assert isinstance(session, aiohttp.ClientSession)
    return session


async def test_the_environment_proxy_is_kept_and_no_longer_looked_up_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.test:3128")

    api = await api_for()
    try:
        assert api.client.rest_client.proxy == "http://proxy.example.test:3128"
        assert session_of(api).trust_env is False
    finally:
        await api.close()


async def test_proxy_credentials_become_a_proxy_authorization_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example.test:3128")

    api = await api_for()
    try:
        headers = api.client.rest_client.proxy_headers
        expected = "Basic " + base64.b64encode(b"user:secret").decode()
        assert headers["Proxy-Authorization"] == expected
    finally:
        await api.close()


async def test_no_proxy_bypasses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.test:3128")
    monkeypatch.setenv("NO_PROXY", "apiserver.example.test")

    api = await api_for()
    try:
        assert not api.client.rest_client.proxy
        assert session_of(api).trust_env is False
    finally:
        await api.close()


async def test_without_a_proxy_nothing_is_set() -> None:
    api = await api_for()
    try:
        assert not api.client.rest_client.proxy
        assert session_of(api).trust_env is False
    finally:
        await api.close()


async def test_a_request_on_a_closed_connection_is_an_unreachable_cluster() -> None:
    """Not aiohttp's bare RuntimeError ("Session is closed"): a task still holding a replaced
    worker connection must see what every caller handles, an unreachable cluster."""
    api = await api_for()
    await api.close()
    with pytest.raises(errors.Unreachable, match="its connection is closed"):
        await api._send("GET", "/api")
