"""Kueue's visibility API shapes: positions, offset and limit, errors and discovery, as
upstream v0.17.0 answers (its storage code run as a server, and its unit tests
pending_workloads_cq_test.go / pending_workloads_lq_test.go), and the upstream bugs avoided."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manager.federation import visibility as v


def wl(name: str, ns: str, lq: str, priority: int, created: str, owner: bool = False) -> Any:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "creationTimestamp": created,
        "uid": f"uid-{name}",
        "labels": {"foo": "bar"},
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "job1",
                "uid": "juid1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {"metadata": meta, "spec": {"queueName": lq, "priority": priority}}


# The ClusterQueue's queue order (priority, then time), as the core gives it.
PENDING = [
    wl("w1", "ns1", "lqa", 100, "2025-01-02T03:04:05Z", owner=True),
    wl("w4", "ns2", "lqa", 75, "2025-01-02T03:04:07Z"),
    wl("w2", "ns1", "lqb", 50, "2025-01-02T03:04:05Z"),
    wl("w3", "ns1", "lqa", 50, "2025-01-02T03:04:06Z"),
]


def test_a_cluster_queue_s_summary_is_upstream_s_document_byte_for_byte() -> None:
    items = v.cluster_queue_items(PENDING, v.Options())
    body = v.dumps(v.summary("v1beta1", items)).decode()
    # upstream's answer for the same queue, except w4's LocalQueue position: upstream counts
    # ns1/lqa's w1 before ns2/lqa's w4 (it ignores the namespace); here ns2/lqa is its own.
    assert body == (
        '{"kind":"PendingWorkloadsSummary","apiVersion":"visibility.kueue.x-k8s.io/v1beta1",'
        '"metadata":{},"items":[{"metadata":{"name":"w1","namespace":"ns1","creationTimestamp":'
        '"2025-01-02T03:04:05Z","ownerReferences":[{"apiVersion":"batch/v1","kind":"Job",'
        '"name":"job1","uid":"juid1"}]},"priority":100,"localQueueName":"lqa",'
        '"positionInClusterQueue":0,"positionInLocalQueue":0},{"metadata":{"name":"w4",'
        '"namespace":"ns2","creationTimestamp":"2025-01-02T03:04:07Z"},"priority":75,'
        '"localQueueName":"lqa","positionInClusterQueue":1,"positionInLocalQueue":0},'
        '{"metadata":{"name":"w2","namespace":"ns1","creationTimestamp":"2025-01-02T03:04:05Z"},'
        '"priority":50,"localQueueName":"lqb","positionInClusterQueue":2,'
        '"positionInLocalQueue":0},{"metadata":{"name":"w3","namespace":"ns1",'
        '"creationTimestamp":"2025-01-02T03:04:06Z"},"priority":50,"localQueueName":"lqa",'
        '"positionInClusterQueue":3,"positionInLocalQueue":1}]}\n'
    )


def test_cluster_queue_offset_and_limit_count_cluster_queue_positions() -> None:
    items = v.cluster_queue_items(PENDING, v.Options(offset=1, limit=2))
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in items] == [
        ("w4", 1),
        ("w2", 2),
    ]
    # the skipped w1 still counts in ns1/lqa's positions
    later = v.cluster_queue_items(PENDING, v.Options(offset=3, limit=5))
    assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in later] == [("w3", 1)]


def test_local_queue_offset_and_limit_count_local_queue_positions() -> None:
    items = v.local_queue_items(PENDING, "ns1", "lqa", v.Options())
    assert [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in items
    ] == [("w1", 0, 0), ("w3", 3, 1)]
    assert [
        i["metadata"]["name"] for i in v.local_queue_items(PENDING, "ns1", "lqa", v.Options(1, 1))
    ] == ["w3"]
    assert v.local_queue_items(PENDING, "ns1", "lqa", v.Options(offset=5)) == []


def test_upstream_bug_avoided_a_local_queue_never_lists_another_namespace_s_workloads() -> None:
    """Upstream v0.17.0 answers ``namespaces/ns2/localqueues/lqa`` with ns1's w1 and w3 too
    (it compares queue names only): a tenant would read another's workload names."""
    items = v.local_queue_items(PENDING, "ns2", "lqa", v.Options())
    assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in items] == [("w4", 0)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, v.Options(0, 1000)),
        ({"limit": "0"}, v.Options(0, 1000)),  # upstream: 0 means the default
        ({"limit": "2", "offset": "3"}, v.Options(3, 2)),
    ],
)
def test_options_default_as_upstream(query: dict[str, str], expected: v.Options) -> None:
    assert v.options(query) == expected


def test_an_unreadable_option_is_upstream_s_400() -> None:
    with pytest.raises(v.VisibilityError) as caught:
        v.options({"limit": "abc"})
    assert caught.value.code == 400
    assert v.dumps(caught.value.status).decode() == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        '"strconv.ParseInt: parsing \\"abc\\": invalid syntax","reason":"BadRequest","code":400}\n'
    )


def test_upstream_bug_avoided_a_negative_limit_is_a_400_not_a_crash() -> None:
    for query in ({"limit": "-1"}, {"offset": "-1"}):
        with pytest.raises(v.VisibilityError) as caught:
            v.options(query)
        assert caught.value.code == 400


def test_an_unknown_queue_is_upstream_s_404() -> None:
    err = v.not_found("clusterqueue", "nope")
    assert err.code == 404
    assert v.dumps(err.status).decode() == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        '"clusterqueue.visibility.kueue.x-k8s.io \\"nope\\" not found","reason":"NotFound",'
        '"details":{"name":"nope","group":"visibility.kueue.x-k8s.io","kind":"clusterqueue"},'
        '"code":404}\n'
    )


def test_discovery_is_upstream_s() -> None:
    resources = v.api_resources("v1beta1")
    assert json.dumps(resources, separators=(",", ":")) == (
        '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":'
        '"visibility.kueue.x-k8s.io/v1beta1","resources":[{"name":"clusterqueues",'
        '"singularName":"clusterqueue","namespaced":false,"kind":"PendingWorkloadsSummary",'
        '"verbs":[]},{"name":"clusterqueues/pendingworkloads","singularName":"",'
        '"namespaced":false,"kind":"PendingWorkloadsSummary","verbs":["get"]},'
        '{"name":"localqueues","singularName":"localqueue","namespaced":true,'
        '"kind":"PendingWorkloadsSummary","verbs":[]},{"name":"localqueues/pendingworkloads",'
        '"singularName":"","namespaced":true,"kind":"PendingWorkloadsSummary","verbs":["get"]}]}'
    )
    group = v.api_group()
    assert group["preferredVersion"] == {
        "groupVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "version": "v1beta2",
    }
    assert [x["version"] for x in group["versions"]] == ["v1beta2", "v1beta1"]
