"""The pure parts of `kfed cluster`: refusing unsafe worker kubeconfigs before anything is
created, the capacity table and the cluster list."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from manager.api import constants as C
from manager.cli.clusterstatus import capacity_rows, cluster_rows, describe_active
from manager.cli.common import EXIT_USAGE, CliError
from manager.cli.workerobjects import check_name, check_worker_kubeconfig, kubeconfig_secret
from tests.unit.cli.builders import cluster_queue, condition

CA = base64.b64encode(b"ca").decode()


def worker_kubeconfig(**cluster_extra: object) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "w1",
            "clusters": [
                {
                    "name": "w1",
                    "cluster": {
                        "server": "https://10.0.0.1:6443",
                        "certificate-authority-data": CA,
                        **cluster_extra,
                    },
                },
                {"name": "other", "cluster": {"server": "https://10.0.0.2:6443"}},
            ],
            "users": [{"name": "admin", "user": {"token": "secret-token"}}],
            "contexts": [
                {"name": "w1", "context": {"cluster": "w1", "user": "admin"}},
                {"name": "other", "context": {"cluster": "other", "user": "admin"}},
            ],
        }
    )


def test_a_safe_kubeconfig_is_reduced_to_its_context() -> None:
    checked = check_worker_kubeconfig(worker_kubeconfig(), context=None, source="w1.yaml")
    assert [c["name"] for c in checked.config["clusters"]] == ["w1"]
    secret = kubeconfig_secret("worker-1", "kueue-system", checked)
    stored = yaml.safe_load(base64.b64decode(secret["data"][C.MULTIKUEUE_KUBECONFIG_SECRET_KEY]))
    assert stored == checked.config
    assert secret["metadata"]["namespace"] == "kueue-system"


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"insecure-skip-tls-verify": True}, "InsecureKubeConfig"),
        ({"proxy-url": "http://proxy:3128"}, "InsecureKubeConfig"),
        ({"server": ""}, "BadKubeConfig"),
    ],
)
def test_an_unsafe_kubeconfig_is_a_usage_error_with_the_reason(
    extra: dict[str, object], reason: str
) -> None:
    with pytest.raises(CliError) as caught:
        check_worker_kubeconfig(worker_kubeconfig(**extra), context=None, source="w1.yaml")
    assert caught.value.code == EXIT_USAGE
    assert caught.value.message.startswith(f"refusing w1.yaml: {reason}: ")


def test_a_missing_context_is_refused() -> None:
    with pytest.raises(CliError) as caught:
        check_worker_kubeconfig(worker_kubeconfig(), context="nope", source="w1.yaml")
    assert "no context 'nope'" in caught.value.message


@pytest.mark.parametrize("name", ["Worker_1", "-w", "", "a" * 254])
def test_cluster_names_must_be_dns_names(name: str) -> None:
    with pytest.raises(CliError) as caught:
        check_name(name)
    assert caught.value.code == EXIT_USAGE


def test_capacity_rows_subtract_reservations() -> None:
    cq = cluster_queue(
        "worker-cq",
        {"h100": {"cpu": 64, "nvidia.com/gpu": 8}, "rtx": {"nvidia.com/gpu": 2}},
        reserved={"h100": {"cpu": "1500m", "nvidia.com/gpu": 3}},
    )
    rows = [(r.flavor, r.resource, r.nominal, r.reserved, r.free) for r in capacity_rows([cq])]
    assert rows == [
        ("h100", "cpu", "64", "1500m", "62500m"),
        ("h100", "nvidia.com/gpu", "8", "3", "5"),
        ("rtx", "nvidia.com/gpu", "2", "0", "2"),
    ]


def test_cluster_rows_show_activity_maintenance_and_configs() -> None:
    w1 = {
        "metadata": {"name": "worker-1", "annotations": {C.MAINTENANCE_ANNOTATION: "drain"}},
        "status": {"conditions": [condition(C.ACTIVE, True, "Active", "Connected")]},
    }
    w2 = {"metadata": {"name": "worker-2"}}
    configs = [
        {"metadata": {"name": "b"}, "spec": {"clusters": ["worker-1"]}},
        {"metadata": {"name": "a"}, "spec": {"clusters": ["worker-1", "worker-2"]}},
    ]
    rows = cluster_rows([w2, w1], configs)
    assert [(r.name, r.active, r.reason, r.maintenance, r.configs, r.message) for r in rows] == [
        ("worker-1", "True", "Active", "drain", "a,b", "Connected"),
        ("worker-2", "Unknown", "", "", "a", ""),
    ]


def test_cluster_rows_never_show_a_credential_in_a_server_url() -> None:
    # conditions an older manager wrote, for a kubeconfig it accepted then
    stored: list[dict[str, Any]] = [
        {
            "metadata": {"name": name},
            "status": {"conditions": [condition(C.ACTIVE, False, "X", message)]},
        }
        for name, message in [
            ("w1", "w1 https://h:6443/?token=s3cret: InvalidURL: https://h:6443/?token=s3cret"),
            ("w2", "cluster 'w2' server 'h:6443/?token=s3cret' is not https"),
            ("w3", "cannot connect to https://admin:s3cret@h:6443/api"),
        ]
    ]
    rows = cluster_rows(stored, [])
    assert [r.message for r in rows] == [
        "w1 https://h:6443/?[redacted] InvalidURL: https://h:6443/?[redacted]",
        "cluster 'w2' server 'h:6443/?[redacted]' is not https",
        "cannot connect to https://[redacted]@h:6443/api",
    ]
    assert "s3cret" not in describe_active(stored[0]["status"]["conditions"][0])


@pytest.mark.parametrize(
    "server",
    ["https://10.0.0.1:6443/?token=s3cret", " https://10.0.0.1:6443", "https://u:s3cret@h:1"],
)
def test_a_server_with_a_query_userinfo_or_blanks_is_refused_without_the_secret(
    server: str,
) -> None:
    with pytest.raises(CliError) as caught:
        check_worker_kubeconfig(worker_kubeconfig(server=server), context=None, source="w1.yaml")
    assert caught.value.code == EXIT_USAGE
    assert "s3cret" not in caught.value.message
