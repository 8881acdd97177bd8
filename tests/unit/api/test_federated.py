"""The one answer to "is this ClusterQueue federated, through which check, to which workers"
(manager/api/federated.py), as upstream decides it."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api import constants as C
from manager.api import federated

Obj = dict[str, Any]


def check(name: str, controller: str = C.MULTIKUEUE_CONTROLLER_NAME, config: str = "cfg") -> Obj:
    params = {"apiGroup": C.GROUP, "kind": "MultiKueueConfig", "name": config} if config else {}
    return {
        "metadata": {"name": name},
        "spec": {"controllerName": controller, "parameters": params},
    }


def queue(*rules: Obj) -> Obj:
    return {
        "metadata": {"name": "cq"},
        "spec": {"admissionChecksStrategy": {"admissionChecks": list(rules)}},
    }


CHECKS = {
    "mk": check("mk"),
    "mk2": check("mk2", config="other"),
    "prov": check("prov", controller="kueue.x-k8s.io/provisioning-request"),
    "mk-noconfig": check("mk-noconfig", config=""),
}
CONFIGS = {
    "cfg": {"metadata": {"name": "cfg"}, "spec": {"clusters": ["w1", "w2"]}},
    "other": {"metadata": {"name": "other"}, "spec": {"clusters": ["w3"]}},
}


@pytest.mark.parametrize(
    ("cluster_queue", "expected"),
    [
        pytest.param(None, None, id="no ClusterQueue"),
        pytest.param({"spec": {}}, None, id="no checks: runs on the manager"),
        pytest.param(queue({"name": "prov"}), None, id="another controller's check only"),
        pytest.param(queue({"name": "missing"}), None, id="a check that does not exist"),
        pytest.param(
            queue({"name": "prov"}, {"name": "mk"}),
            federated.Federation("mk", "cfg", ("w1", "w2"), None),
            id="the MultiKueue check among others, workers in config order",
        ),
        pytest.param(
            queue({"name": "mk-noconfig"}),
            federated.Federation("mk-noconfig", "", (), None),
            id="parameters naming no MultiKueueConfig: federated, to no worker",
        ),
        pytest.param(
            {"spec": {"admissionChecks": ["mk"]}},
            None,
            id="v1beta1's spec.admissionChecks list is not read (v1beta2 has none)",
        ),
    ],
)
def test_federation_of(cluster_queue: Obj | None, expected: federated.Federation | None) -> None:
    assert federated.federation_of(cluster_queue, CHECKS.get, CONFIGS.get) == expected


def test_upstream_two_multikueue_checks_is_a_problem_with_upstreams_reason() -> None:
    found = federated.federation_of(queue({"name": "mk"}, {"name": "mk2"}), CHECKS.get, CONFIGS.get)
    assert found is not None and found.problem is not None
    reason, message = found.problem
    assert reason == C.REASON_MULTIPLE_MULTIKUEUE_CHECKS
    assert message.endswith("found: mk,mk2.")


def test_upstream_a_multikueue_check_on_flavors_is_a_problem_with_upstreams_reason() -> None:
    cq = queue({"name": "mk", "onFlavors": ["h100"]})
    assert federated.configuration_problem(cq, CHECKS.get) == (
        C.REASON_MULTIKUEUE_CHECK_PER_FLAVOR,
        "Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per flavor, "
        "found: mk.",
    )
    # Another controller's check may be limited to flavors.
    assert (
        federated.configuration_problem(queue({"name": "prov", "onFlavors": ["a"]}), CHECKS.get)
        is None
    )


def test_check_names_keep_the_strategys_order() -> None:
    assert federated.check_names(queue({"name": "b"}, {"name": "a"})) == ["b", "a"]


def _bound(value: str | None) -> dict[str, object]:
    annotations = {} if value is None else {C.NAMESPACES_ANNOTATION: value}
    return {"metadata": {"name": "worker-1", "annotations": annotations}}


def test_namespace_binding_is_open_without_the_annotation_and_a_list_of_globs_with_it() -> None:
    assert federated.namespace_bound(_bound(None), "anything")
    assert federated.namespace_bound(None, "anything")
    assert federated.namespace_bound(_bound("ml-jobs, team-*"), "team-a")
    assert federated.namespace_bound(_bound("ml-jobs, team-*"), "ml-jobs")
    assert not federated.namespace_bound(_bound("ml-jobs, team-*"), "ml-jobs-2")
    assert not federated.namespace_bound(_bound(""), "ml-jobs"), "empty binds nothing"
    assert federated.bound_namespaces(_bound(" a ,, b ")) == ("a", "b")
