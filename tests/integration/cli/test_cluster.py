"""`kfed cluster add|list|cordon|drain|uncordon|remove` on a real manager apiserver, with the
lite workers' kubeconfigs. No kfed manager runs here, so nothing sets Active by itself: tests
add with --no-wait, or write the Active condition themselves as the manager would."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from e2e.local.federation import LocalFederation
from manager.api import constants as C
from manager.kube import resources as R
from tests.integration.cli.conftest import Cleanup, Kfed, Kube

pytestmark = pytest.mark.integration


def _register_cleanup(manager: Kube, cleanup: Cleanup, kfed: Kfed, *names: str) -> None:
    for name in names:
        cleanup.add(manager, R.SECRETS, name, kfed.namespace)
        cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)


def test_add_list_maintain_and_remove_workers(
    kueue_crds: LocalFederation, kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str
) -> None:
    w1, w2, config = f"w1-{unique}", f"w2-{unique}", f"cfg-{unique}"
    cleanup.add(manager, R.MULTIKUEUE_CONFIGS, config)
    _register_cleanup(manager, cleanup, kfed, w1, w2)

    # add: Secret (reduced kubeconfig), MultiKueueCluster and a new MultiKueueConfig
    worker_1 = str(kueue_crds.kubeconfig("worker-1"))
    result = kfed(
        "cluster", "add", w1, "--kubeconfig-file", worker_1, "--config", config, "--no-wait"
    )
    assert result.exit_code == 0, result.output
    assert f"created Secret {kfed.namespace}/{w1}" in result.stdout
    assert f"created MultiKueueCluster {w1}" in result.stdout
    assert f"created MultiKueueConfig {config} with {w1}" in result.stdout
    assert "no AdmissionCheck" in result.stderr  # nothing uses the config yet
    assert "Traceback" not in result.output

    secret = manager.get(R.SECRETS, w1, kfed.namespace)
    assert secret is not None
    stored = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    original = yaml.safe_load(Path(worker_1).read_text())
    assert (
        stored["clusters"][0]["cluster"]["server"] == original["clusters"][0]["cluster"]["server"]
    )
    assert len(stored["contexts"]) == 1
    mk_cluster = manager.get(R.MULTIKUEUE_CLUSTERS, w1)
    assert mk_cluster is not None
    assert mk_cluster["spec"]["clusterSource"]["kubeConfig"] == {
        "location": w1,
        "locationType": "Secret",
    }
    mk_config = manager.get(R.MULTIKUEUE_CONFIGS, config)
    assert mk_config is not None and mk_config["spec"]["clusters"] == [w1]

    # a second worker joins the same config; adding the first again changes nothing
    worker_2 = str(kueue_crds.kubeconfig("worker-2"))
    result = kfed(
        "cluster", "add", w2, "--kubeconfig-file", worker_2, "--config", config, "--no-wait"
    )
    assert result.exit_code == 0, result.output
    result = kfed(
        "cluster", "add", w1, "--kubeconfig-file", worker_1, "--config", config, "--no-wait"
    )
    assert result.exit_code == 0, result.output
    assert f"MultiKueueCluster {w1} unchanged" in result.stdout
    mk_config = manager.get(R.MULTIKUEUE_CONFIGS, config)
    assert mk_config is not None and mk_config["spec"]["clusters"] == [w1, w2]

    # list: both, not Active (no manager runs), member of the config
    result = kfed("cluster", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows[w1]["active"] == "Unknown" and rows[w1]["configs"] == config
    assert rows[w2]["maintenance"] == ""
    table = kfed("cluster", "list")
    assert table.exit_code == 0
    assert table.stdout.splitlines()[0].split()[:5] == [
        "NAME",
        "ACTIVE",
        "REASON",
        "MAINTENANCE",
        "CONFIGS",
    ]

    # cordon, drain, uncordon: the kfed.io/maintenance annotation
    def maintenance() -> str | None:
        obj = manager.get(R.MULTIKUEUE_CLUSTERS, w2)
        assert obj is not None
        return (obj["metadata"].get("annotations") or {}).get(C.MAINTENANCE_ANNOTATION)

    assert kfed("cluster", "cordon", w2).exit_code == 0
    assert maintenance() == "cordon"
    result = kfed("cluster", "drain", w2)
    assert result.exit_code == 0 and "draining" in result.stdout
    assert maintenance() == "drain"
    rows = {r["name"]: r for r in json.loads(kfed("cluster", "list", "-o", "json").stdout)}
    assert rows[w2]["maintenance"] == "drain"
    assert kfed("cluster", "uncordon", w2).exit_code == 0
    assert maintenance() is None
    missing = kfed("cluster", "cordon", f"missing-{unique}")
    assert missing.exit_code == 1
    assert "no MultiKueueCluster" in missing.stderr

    # remove: out of the config, MultiKueueCluster and Secret deleted
    result = kfed("cluster", "remove", w1)
    assert result.exit_code == 0, result.output
    mk_config = manager.get(R.MULTIKUEUE_CONFIGS, config)
    assert mk_config is not None and mk_config["spec"]["clusters"] == [w2]
    assert manager.get(R.MULTIKUEUE_CLUSTERS, w1) is None
    assert manager.get(R.SECRETS, w1, kfed.namespace) is None

    # removing the last member deletes the config (the API needs at least one cluster)
    result = kfed("cluster", "remove", w2)
    assert result.exit_code == 0, result.output
    assert f"deleted MultiKueueConfig {config}" in result.stdout
    assert manager.get(R.MULTIKUEUE_CONFIGS, config) is None

    again = kfed("cluster", "remove", w2)
    assert again.exit_code == 1
    assert again.stderr.startswith("error: no worker cluster")


def test_an_unsafe_kubeconfig_is_refused_and_nothing_is_created(
    kueue_crds: LocalFederation, kfed: Kfed, manager: Kube, tmp_path: Path, unique: str
) -> None:
    config = yaml.safe_load(kueue_crds.kubeconfig("worker-1").read_text())
    config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    unsafe = tmp_path / "unsafe.kubeconfig"
    unsafe.write_text(yaml.safe_dump(config))
    name = f"unsafe-{unique}"

    result = kfed("cluster", "add", name, "--kubeconfig-file", str(unsafe), "--no-wait")

    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: refusing {unsafe}: InsecureKubeConfig: ")
    assert "insecure-skip-tls-verify" in result.stderr
    assert result.stdout == ""
    assert manager.get(R.MULTIKUEUE_CLUSTERS, name) is None
    assert manager.get(R.NAMESPACES, kfed.namespace) is None, "not even the namespace"


def test_add_waits_for_active_and_shows_the_workers_capacity(
    kueue_crds: LocalFederation,
    kfed: Kfed,
    manager: Kube,
    workers: dict[str, Kube],
    cleanup: Cleanup,
    unique: str,
) -> None:
    name, config, cq, rf = f"w-{unique}", f"cfg-{unique}", f"cq-{unique}", f"rf-{unique}"
    cleanup.add(manager, R.MULTIKUEUE_CONFIGS, config)
    _register_cleanup(manager, cleanup, kfed, name)
    worker = workers["worker-1"]
    worker.create(
        R.RESOURCE_FLAVORS,
        {"apiVersion": C.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": rf}},
    )
    cleanup.add(worker, R.RESOURCE_FLAVORS, rf)
    worker.create(
        R.CLUSTER_QUEUES,
        {
            "apiVersion": C.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": rf,
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}],
                            }
                        ],
                    }
                ]
            },
        },
    )
    cleanup.add(worker, R.CLUSTER_QUEUES, cq)
    worker.patch_status(
        R.CLUSTER_QUEUES,
        cq,
        {
            "flavorsReservation": [
                {"name": rf, "resources": [{"name": "nvidia.com/gpu", "total": "3"}]}
            ]
        },
    )
    kubeconfig_file = str(kueue_crds.kubeconfig("worker-1"))
    add = ("cluster", "add", name, "--kubeconfig-file", kubeconfig_file, "--config", config)
    assert kfed(*add, "--no-wait").exit_code == 0

    # the manager reports a failure: add --wait times out with its reason and message
    manager.patch_status(
        R.MULTIKUEUE_CLUSTERS,
        name,
        {
            "conditions": [
                {
                    "type": "Active",
                    "status": "False",
                    "reason": "ClientConnectionFailed",
                    "message": "dial tcp: connection refused",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ]
        },
    )
    result = kfed(*add, "--timeout", "500ms")
    assert result.exit_code == 1
    assert (
        "is not Active after 0.5s: Active=False ClientConnectionFailed: dial tcp" in result.stderr
    )

    # the manager connected: add --wait returns at once and prints the capacity
    manager.patch_status(
        R.MULTIKUEUE_CLUSTERS,
        name,
        {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "Connected",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ]
        },
    )
    result = kfed(*add, "--timeout", "10s")
    assert result.exit_code == 0, result.output
    assert f"{name} is Active: Connected" in result.stdout
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith(cq))
    assert row == [cq, rf, "nvidia.com/gpu", "8", "3", "5"]
