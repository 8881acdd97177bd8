"""The aggregated visibility API's pure parts: what kube-apiserver publishes about its front
proxy, and the authorization attributes of a path (the whole path is checked on a real
kube-apiserver in tests/integration/controllers/test_visibility_apiservice.py)."""

from __future__ import annotations

import json

import pytest

from manager.observability.aggregated import front_proxy_of, resource_attributes

GROUP = "visibility.kueue.x-k8s.io"


def test_the_front_proxy_is_read_as_kube_apiserver_publishes_it() -> None:
    proxy = front_proxy_of(
        {
            "data": {
                "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\n...",
                "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
                "requestheader-username-headers": json.dumps(["X-Remote-User"]),
                "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            }
        }
    )
    assert proxy.allowed_names == {"front-proxy-client"}
    assert proxy.user_headers == ("X-Remote-User",)


def test_without_a_front_proxy_ca_aggregation_cannot_work_and_says_why() -> None:
    with pytest.raises(ValueError, match="--requestheader-client-ca-file"):
        front_proxy_of({"data": {"client-ca-file": "..."}})


def test_paths_name_what_to_authorize() -> None:
    assert resource_attributes(f"/apis/{GROUP}/v1beta1/clusterqueues/gpu-cq/pendingworkloads") == {
        "group": GROUP,
        "version": "v1beta1",
        "resource": "clusterqueues",
        "subresource": "pendingworkloads",
        "name": "gpu-cq",
        "verb": "get",
    }
    lq = resource_attributes(
        f"/apis/{GROUP}/v1beta2/namespaces/team-a/localqueues/lq/pendingworkloads"
    )
    assert lq is not None and (lq["namespace"], lq["resource"], lq["name"]) == (
        "team-a",
        "localqueues",
        "lq",
    )


@pytest.mark.parametrize(
    "path",
    [
        f"/apis/{GROUP}",
        f"/apis/{GROUP}/v1beta1",
        "/apis/other.group/v1/clusterqueues/x/pendingworkloads",
    ],
)
def test_discovery_and_other_paths_need_no_resource_check(path: str) -> None:
    assert resource_attributes(path) is None
