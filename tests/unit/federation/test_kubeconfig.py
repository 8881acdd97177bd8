"""Unsafe or broken worker kubeconfigs are refused with a reason and a readable message."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from manager.federation.workers import kubeconfig as kc

B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()


def good() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "w1",
                "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": B64},
            }
        ],
        "users": [{"name": "sa", "user": {"token": "abc"}}],
        "contexts": [{"name": "w1", "context": {"cluster": "w1", "user": "sa"}}],
        "current-context": "w1",
    }


def with_(path: str, value: Any) -> str:
    config = good()
    node: Any = config
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return yaml.safe_dump(config)


_DELETE = object()


def test_a_good_kubeconfig_is_reduced_to_its_context() -> None:
    config = good()
    config["contexts"].append({"name": "other", "context": {"cluster": "w1", "user": "sa"}})
    checked = kc.check(yaml.safe_dump(config))
    assert checked.context == "w1" and checked.server == "https://127.0.0.1:6443"
    assert [c["name"] for c in checked.config["contexts"]] == ["w1"]
    assert kc.check(yaml.safe_dump(config), context="other").context == "other"


CASES = [
    ("not yaml", "clusters: [", kc.BAD_KUBECONFIG, "not valid YAML"),
    ("a list", "- a\n- b\n", kc.BAD_KUBECONFIG, "not a YAML mapping"),
    ("no clusters", with_("clusters", _DELETE), kc.BAD_KUBECONFIG, "no clusters"),
    ("unknown context", with_("current-context", "nope"), kc.BAD_KUBECONFIG, "no context 'nope'"),
    ("empty server", with_("clusters.0.cluster.server", ""), kc.BAD_KUBECONFIG, "empty server"),
    (
        "bad host",
        with_("clusters.0.cluster.server", "https://Bad_Host:1"),
        kc.BAD_KUBECONFIG,
        "neither an IP",
    ),
    (
        "bad port",
        with_("clusters.0.cluster.server", "https://h:99999999"),
        kc.BAD_KUBECONFIG,
        "invalid port",
    ),
    (
        "credentials in the server url",
        with_("clusters.0.cluster.server", "https://user:s3cret@h:6443"),
        kc.INSECURE_KUBECONFIG,
        "carries credentials",
    ),
    (
        "user in the server url",
        with_("clusters.0.cluster.server", "https://user@h:6443"),
        kc.INSECURE_KUBECONFIG,
        "carries credentials",
    ),
    (
        "a password whose '/' hides the '@' from urlsplit",
        with_("clusters.0.cluster.server", "https://user:s3/cret@h:6443"),
        kc.INSECURE_KUBECONFIG,
        "carries credentials",
    ),
    (
        "a token in the query string",
        with_("clusters.0.cluster.server", "https://h:6443/?token=s3cret"),
        kc.INSECURE_KUBECONFIG,
        "query string",
    ),
    (
        "a token in the query string of a plain http url",
        with_("clusters.0.cluster.server", "http://h:6443?access_token=s3cret"),
        kc.INSECURE_KUBECONFIG,
        "query string",
    ),
    (
        "an empty query string",
        with_("clusters.0.cluster.server", "https://h:6443/?"),
        kc.INSECURE_KUBECONFIG,
        "query string",
    ),
    (
        "a fragment",
        with_("clusters.0.cluster.server", "https://h:6443/#s3cret"),
        kc.BAD_KUBECONFIG,
        "fragment",
    ),
    (
        "a leading space",
        with_("clusters.0.cluster.server", " https://h:6443"),
        kc.BAD_KUBECONFIG,
        "leading or trailing whitespace",
    ),
    (
        "a trailing newline",
        with_("clusters.0.cluster.server", "https://h:6443\n"),
        kc.BAD_KUBECONFIG,
        "leading or trailing whitespace",
    ),
    (
        "a tab inside",
        with_("clusters.0.cluster.server", "https://h:6443/\ts3cret"),
        kc.BAD_KUBECONFIG,
        "whitespace or a control character",
    ),
    (
        "a malformed ipv6 address",
        with_("clusters.0.cluster.server", "https://[::1:6443"),
        kc.BAD_KUBECONFIG,
        "invalid port or address",
    ),
    (
        "plain http",
        with_("clusters.0.cluster.server", "http://h:80"),
        kc.INSECURE_KUBECONFIG,
        "not https",
    ),
    (
        "skip tls",
        with_("clusters.0.cluster.insecure-skip-tls-verify", True),
        kc.INSECURE_KUBECONFIG,
        "insecure-skip-tls-verify",
    ),
    (
        "ca path",
        with_("clusters.0.cluster.certificate-authority", "/etc/ca.crt"),
        kc.INSECURE_KUBECONFIG,
        "file path",
    ),
    (
        "bad ca data",
        with_("clusters.0.cluster.certificate-authority-data", "%%%"),
        kc.BAD_KUBECONFIG,
        "not valid base64",
    ),
    (
        "exec plugin",
        with_("users.0.user.exec", {"command": "aws"}),
        kc.INSECURE_KUBECONFIG,
        "exec credential plugin",
    ),
    (
        "auth provider",
        with_("users.0.user.auth-provider", {"name": "gcp"}),
        kc.INSECURE_KUBECONFIG,
        "auth provider",
    ),
    (
        "token file",
        with_("users.0.user.tokenFile", "/var/run/token"),
        kc.INSECURE_KUBECONFIG,
        "token from a file",
    ),
    (
        "cert path",
        with_("users.0.user.client-certificate", "/c.crt"),
        kc.INSECURE_KUBECONFIG,
        "file path",
    ),
    (
        "basic auth",
        with_("users.0.user.username", "admin"),
        kc.INSECURE_KUBECONFIG,
        "basic authentication",
    ),
    ("no credentials", with_("users.0.user.token", _DELETE), kc.BAD_KUBECONFIG, "no credentials"),
]


@pytest.mark.parametrize(
    ("text", "reason", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rejected(text: str, reason: str, fragment: str) -> None:
    with pytest.raises(kc.KubeconfigRejected) as caught:
        kc.check(text)
    assert caught.value.reason == reason
    assert fragment in str(caught.value)
    assert "s3cret" not in str(caught.value), "a refusal never repeats a password"


SECRET_SERVERS = [
    "https://h:6443/?token=s3cret",
    "https://user:s3cret@h:6443",
    "https://user:s3/cret@h:6443/?x=s3cret#s3cret",
    "http://h:6443?access_token=s3cret",
    "h:6443/?token=s3cret",
    " https://h:6443/?token=s3cret",
]


@pytest.mark.parametrize("server", SECRET_SERVERS)
def test_a_refused_server_url_is_never_repeated(server: str) -> None:
    with pytest.raises(kc.KubeconfigRejected) as caught:
        kc.check(with_("clusters.0.cluster.server", server))
    assert "s3cret" not in str(caught.value)
    assert "s3" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://h:6443", "https://h:6443"),
        ("https://[::1]:6443/k8s/clusters/c-1", "https://[::1]:6443/k8s/clusters/c-1"),
        ("https://h:6443/?token=s3cret", "https://h:6443/?[redacted]"),
        ("https://h:6443#s3cret", "https://h:6443#[redacted]"),
        ("https://user:s3cret@h:6443", "https://[redacted]@h:6443"),
        ("https://user:s3/c@ret@h:6443/p?q=s3cret", "https://[redacted]@h:6443/p?[redacted]"),
        ("user:s3cret@h:6443", "[redacted]@h:6443"),
        ("https://h:6443/?token=a@s3cret", "https://h:6443/?[redacted]"),
    ],
)
def test_a_server_is_shown_without_userinfo_query_or_fragment(url: str, shown: str) -> None:
    assert kc.redact_server(url) == shown
    assert kc.redact_server(shown) == shown, "redacting twice changes nothing"


def test_messages_written_before_are_shown_redacted() -> None:
    # what kfed < this fix wrote into conditions, and client errors naming the URL
    old = "cluster 'w1' server 'h:6443/?token=s3cret' is not https"
    assert kc.redact_text(old) == "cluster 'w1' server 'h:6443/?[redacted]' is not https"
    error = (
        "worker-1 https://h:6443/?token=s3cret: InvalidURL: "
        "https://admin:s3cret@h:6443/?token=s3cret/api (retrying)"
    )
    assert kc.redact_text(error) == (
        "worker-1 https://h:6443/?[redacted] InvalidURL: "
        "https://[redacted]@h:6443/?[redacted] (retrying)"
    )
    assert kc.redact_text("Connected to https://h:6443 (v1.31)") == (
        "Connected to https://h:6443 (v1.31)"
    )
