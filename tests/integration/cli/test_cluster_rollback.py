"""`kfed cluster add` that is refused (the worker not Active in time: no kfed manager runs on
this bed, so none ever is) leaves nothing of its own behind on a real manager apiserver: what
it created is deleted, what it changed is put back, and what was there before stays."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.local.federation import LocalFederation
from manager.kube import resources as R
from tests.integration.cli.conftest import Cleanup, Kfed, Kube

pytestmark = pytest.mark.integration


def _gone_or_going(obj: dict[str, Any] | None) -> bool:
    """Deleted (a Namespace stays Terminating until the namespace controller empties it)."""
    return obj is None or bool(obj["metadata"].get("deletionTimestamp"))


def test_a_refused_new_worker_leaves_nothing_behind(
    kueue_crds: LocalFederation, kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str
) -> None:
    name, config = f"new-{unique}", f"cfg-{unique}"
    cleanup.add(manager, R.MULTIKUEUE_CONFIGS, config)
    cleanup.add(manager, R.SECRETS, name, kfed.namespace)
    cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)
    worker_1 = str(kueue_crds.kubeconfig("worker-1"))

    result = kfed(
        "cluster", "add", name, "--kubeconfig-file", worker_1, "--config", config,
        "--timeout", "500ms",
    )  # fmt: skip

    assert result.exit_code == 1, result.output
    assert f"created MultiKueueCluster {name}" in result.stdout  # it did, then undid it
    assert "Traceback" not in result.output
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: {name} is not Active after 0.5s: ")
    assert (
        f"rolled back what it did: deleted MultiKueueConfig {config}, deleted MultiKueueCluster "
        f"{name}, deleted Secret {kfed.namespace}/{name}, deleted Namespace {kfed.namespace}"
    ) in error
    assert manager.get(R.MULTIKUEUE_CLUSTERS, name) is None
    assert manager.get(R.MULTIKUEUE_CONFIGS, config) is None
    assert manager.get(R.SECRETS, name, kfed.namespace) is None
    assert _gone_or_going(manager.get(R.NAMESPACES, kfed.namespace))


def test_a_refused_add_puts_back_what_was_there_and_deletes_none_of_it(
    kueue_crds: LocalFederation, kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str
) -> None:
    kept, other, config = f"kept-{unique}", f"other-{unique}", f"cfg-{unique}"
    cleanup.add(manager, R.MULTIKUEUE_CONFIGS, config)
    for name in (kept, other):
        cleanup.add(manager, R.SECRETS, name, kfed.namespace)
        cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)
    worker_1 = str(kueue_crds.kubeconfig("worker-1"))
    worker_2 = str(kueue_crds.kubeconfig("worker-2"))
    first = ("cluster", "add", kept, "--kubeconfig-file", worker_1, "--config", config)
    assert kfed(*first, "--no-wait").exit_code == 0
    secret_before = manager.get(R.SECRETS, kept, kfed.namespace)
    cluster_before = manager.get(R.MULTIKUEUE_CLUSTERS, kept)
    assert secret_before is not None and cluster_before is not None

    # another worker refused: out of the config again, which keeps the first
    result = kfed(
        "cluster", "add", other, "--kubeconfig-file", worker_2, "--config", config,
        "--timeout", "500ms",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert (
        f"rolled back what it did: took {other} out of MultiKueueConfig {config}, deleted "
        f"MultiKueueCluster {other}, deleted Secret {kfed.namespace}/{other} "
    ) in result.stderr
    mk_config = manager.get(R.MULTIKUEUE_CONFIGS, config)
    assert mk_config is not None and mk_config["spec"]["clusters"] == [kept]
    assert manager.get(R.MULTIKUEUE_CLUSTERS, other) is None
    assert manager.get(R.SECRETS, other, kfed.namespace) is None
    namespace = manager.get(R.NAMESPACES, kfed.namespace)
    assert namespace is not None and not namespace["metadata"].get("deletionTimestamp")

    # the first worker re-added with another kubeconfig and refused: its Secret as it was
    result = kfed(
        "cluster", "add", kept, "--kubeconfig-file", worker_2, "--config", config,
        "--timeout", "500ms",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert f"updated Secret {kfed.namespace}/{kept}" in result.stdout
    assert f"rolled back what it did: restored Secret {kfed.namespace}/{kept} as it was" in (
        result.stderr
    )
    secret = manager.get(R.SECRETS, kept, kfed.namespace)
    assert secret is not None and secret["data"] == secret_before["data"]
    assert secret["metadata"]["uid"] == secret_before["metadata"]["uid"], "never re-created"
    mk_cluster = manager.get(R.MULTIKUEUE_CLUSTERS, kept)
    assert mk_cluster is not None
    assert mk_cluster["metadata"]["uid"] == cluster_before["metadata"]["uid"]
    assert mk_cluster["spec"] == cluster_before["spec"]
    mk_config = manager.get(R.MULTIKUEUE_CONFIGS, config)
    assert mk_config is not None and mk_config["spec"]["clusters"] == [kept]


def test_a_worker_already_registered_and_refused_again_is_kept(
    kueue_crds: LocalFederation, kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str
) -> None:
    name, config = f"same-{unique}", f"cfg-{unique}"
    cleanup.add(manager, R.MULTIKUEUE_CONFIGS, config)
    cleanup.add(manager, R.SECRETS, name, kfed.namespace)
    cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)
    add = ("cluster", "add", name, "--kubeconfig-file", str(kueue_crds.kubeconfig("worker-1")))
    assert kfed(*add, "--config", config, "--no-wait").exit_code == 0

    result = kfed(*add, "--config", config, "--timeout", "500ms")

    assert result.exit_code == 1, result.output
    assert "it had changed nothing on the manager" in result.stderr
    assert manager.get(R.MULTIKUEUE_CLUSTERS, name) is not None
    assert manager.get(R.SECRETS, name, kfed.namespace) is not None
    mk_config = manager.get(R.MULTIKUEUE_CONFIGS, config)
    assert mk_config is not None and mk_config["spec"]["clusters"] == [name]
