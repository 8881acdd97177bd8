"""Queue objects whose status alone changed are not fed to the admission core again: the core
reads none of a status, and most such events are its own usage written back (found by the
scheduler's profile under upstream's runner: a model round trip and a cycle each)."""

from __future__ import annotations

import copy
from typing import Any

from manager.controllers.state import only_status_changed


def cluster_queue() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq", "resourceVersion": "1", "labels": {"team": "a"}},
        "spec": {"namespaceSelector": {}, "resourceGroups": []},
        "status": {"pendingWorkloads": 1},
    }


def test_a_status_write_is_status_only() -> None:
    old = cluster_queue()
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "2"
    new["status"] = {"pendingWorkloads": 0, "admittedWorkloads": 1}
    assert only_status_changed(old, new)


def test_a_spec_label_or_annotation_change_is_fed() -> None:
    old = cluster_queue()
    spec = copy.deepcopy(old)
    spec["spec"]["cohortName"] = "all"
    label = copy.deepcopy(old)
    label["metadata"]["labels"]["team"] = "b"
    annotated = copy.deepcopy(old)
    annotated["metadata"]["annotations"] = {"kfed.io/retention": "1h"}
    assert not only_status_changed(old, spec)
    assert not only_status_changed(old, label)
    assert not only_status_changed(old, annotated)


def test_without_the_old_object_it_is_fed() -> None:
    assert not only_status_changed(None, cluster_queue())
