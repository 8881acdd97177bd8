"""The training-operator v1 kinds beside PyTorchJob (TFJob, XGBoostJob, PaddleJob, JAXJob):
each is the shared Kubeflow adapter with its own resource, replica specs' field, replica types
in upstream Kueue's order, operator name and Workload prefix; suspended and ``managedBy`` in
``spec.runPolicy``, the outcome from its Succeeded/Failed conditions, and the webhook and
``kfed submit`` treat it as a PyTorchJob. (Common behaviour: ``test_kubeflow_jobkinds.py``.)"""

from __future__ import annotations

import copy

import pytest

from manager.api import constants as C
from manager.cli import jobfiles
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import PodSetPlacement
from manager.controllers.jobkinds.jaxjob import JAXJOB
from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.controllers.jobkinds.paddlejob import PADDLEJOB
from manager.controllers.jobkinds.pytorchjob import TRAINING_OPERATOR
from manager.controllers.jobkinds.tfjob import TFJOB
from manager.controllers.jobkinds.xgboostjob import XGBOOSTJOB
from manager.federation.webhooks.webhook import review_job
from manager.federation.workers.remoteobjects import FEDERATED_KINDS
from tests.unit.controllers.test_kubeflow_jobkinds import Obj, kubeflow_job, request_for

KINDS = [TFJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB]
IDS = [k.resource.kind for k in KINDS]


@pytest.mark.parametrize(
    ("kind", "name", "plural", "field", "prefix", "operator"),
    [
        (TFJOB, "tfjob", "tfjobs", "tfReplicaSpecs", "tfjob", "tfjob-controller"),
        (XGBOOSTJOB, "xgboostjob", "xgboostjobs", "xgbReplicaSpecs", "xgboostjob", None),
        (PADDLEJOB, "paddlejob", "paddlejobs", "paddleReplicaSpecs", "paddlejob", None),
        (JAXJOB, "jaxjob", "jaxjobs", "jaxReplicaSpecs", "jaxjob", None),
    ],
    ids=IDS,
)
def test_upstream_registered_under_its_integration_name_and_gvk(
    kind: KubeflowJobKind, name: str, plural: str, field: str, prefix: str, operator: str | None
) -> None:
    """Upstream's ``FrameworkName`` (kubeflow.org/<kind>), its GVK (kubeflow.org/v1), its
    ``ReplicaSpecsFieldName`` and its Workload name's prefix (the kind, lower case)."""
    assert registry.KINDS[f"kubeflow.org/{name}"] is kind
    res = kind.resource
    assert (res.group, res.version, res.plural, res.namespaced) == (
        "kubeflow.org",
        "v1",
        plural,
        True,
    )
    assert registry.by_group_version_kind("kubeflow.org", "v1", res.kind) is kind
    assert kind.replica_specs_field == field
    assert kind.workload_name("train", "0123456789").startswith(f"{prefix}-train-")
    assert kind.default_managed_by == TRAINING_OPERATOR
    assert kind in FEDERATED_KINDS, "placed on workers"
    assert kind.pod_selector("t") == (
        "training.kubeflow.org/job-name=t,"
        f"training.kubeflow.org/operator-name={operator or name + '-controller'}"
    )


@pytest.mark.parametrize(
    ("kind", "replicas", "expected"),
    [
        # Upstream's TestOrderedReplicaTypes "job has all replicas", given in another order.
        (
            TFJOB,
            {"PS": 2, "Evaluator": 1, "Worker": 4, "Chief": 1, "Master": 1},
            [("chief", 1), ("master", 1), ("ps", 2), ("worker", 4), ("evaluator", 1)],
        ),
        # Its TestPodSets "no annotations": chief, PS, worker, one each.
        (TFJOB, {"Worker": 1, "PS": 1, "Chief": 1}, [("chief", 1), ("ps", 1), ("worker", 1)]),
        (TFJOB, {"Worker": None}, [("worker", 1)]),  # "job has only worker replicas"
        (XGBOOSTJOB, {"Worker": 2, "Master": 1}, [("master", 1), ("worker", 2)]),
        (XGBOOSTJOB, {"Worker": 3}, [("worker", 3)]),
        (PADDLEJOB, {"Worker": 2, "Master": None}, [("master", 1), ("worker", 2)]),
        (PADDLEJOB, {"Worker": 0}, [("worker", 0)]),
        (JAXJOB, {"Worker": 4}, [("worker", 4)]),
        (JAXJOB, {}, []),  # "job has no replicas"
    ],
    ids=lambda v: v.resource.kind if isinstance(v, KubeflowJobKind) else None,
)
def test_upstream_ordered_replica_types_are_its_pod_sets(
    kind: KubeflowJobKind, replicas: dict[str, int | None], expected: list[tuple[str, int]]
) -> None:
    """Upstream's ``OrderedReplicaTypes``: the types the job has, in the kind's order, each a
    pod set named by the type in lower case, of ``replicas`` pods (1 when unset)."""
    job = kubeflow_job(kind, replicas)
    pod_sets = kind.pod_sets(job)
    assert [(ps.name, ps.count) for ps in pod_sets] == expected
    for ps, replica_type in zip(
        pod_sets, sorted(replicas, key=kind.replica_types.index), strict=True
    ):
        assert ps.template is job["spec"][kind.replica_specs_field][replica_type]["template"]


def test_a_type_of_another_kind_is_no_pod_set() -> None:
    job = kubeflow_job(JAXJOB, {"Worker": 2, "Master": 1})
    assert [ps.name for ps in JAXJOB.pod_sets(job)] == ["worker"]
    job = kubeflow_job(XGBOOSTJOB, {"Master": 1, "Chief": 1})
    assert [ps.name for ps in XGBOOSTJOB.pod_sets(job)] == ["master"]


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_suspended_and_managed_in_run_policy_and_sent_to_a_worker_without_managed_by(
    kind: KubeflowJobKind,
) -> None:
    first = kind.replica_types[0]
    job = kubeflow_job(kind, {first: 1}, suspend=True, managedBy=C.MULTIKUEUE_MANAGED_BY)
    assert kind.is_suspended(job)
    assert kind.managed_by(job) == C.MULTIKUEUE_MANAGED_BY
    assert kind.suspend_fields(False) == {"spec": {"runPolicy": {"suspend": False}}}
    assert not kind.is_suspended(kubeflow_job(kind, {first: 1}))
    before = copy.deepcopy(job)
    assert kind.spec_for_worker(job)["runPolicy"] == {"suspend": True}
    assert job == before


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_run_patch_places_each_replica_type_and_resumes_it(kind: KubeflowJobKind) -> None:
    job = kubeflow_job(kind, dict.fromkeys(kind.replica_types, 1), suspend=True)
    placement = PodSetPlacement({"gpu.model": "h100"}, [])
    [patch] = kind.run_patches(job, {ps.name: placement for ps in kind.pod_sets(job)})
    assert patch["spec"]["runPolicy"] == {"suspend": False}
    specs = patch["spec"][kind.replica_specs_field]
    assert sorted(specs) == sorted(kind.replica_types)
    for spec in specs.values():
        assert spec["template"]["spec"]["nodeSelector"] == {"gpu.model": "h100"}


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}], None),
        ([{"type": "Succeeded", "status": "True", "message": "ok"}], (True, "ok")),
        ([{"type": "Failed", "status": "True"}], (False, "{kind} failed")),
    ],
)
def test_outcome_by_its_conditions(
    kind: KubeflowJobKind, conditions: list[Obj], expected: tuple[bool, str] | None
) -> None:
    job = kubeflow_job(kind, {kind.replica_types[0]: 1})
    job["status"] = {"conditions": conditions, "replicaStatuses": {"Worker": {"active": 1}}}
    found = kind.outcome(job)
    assert kind.is_active(job)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.succeeded, found.message) == (
            expected[0],
            expected[1].format(kind=kind.resource.kind),
        )


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_webhook_suspends_it_and_kfed_submit_prepares_it(kind: KubeflowJobKind) -> None:
    job = kubeflow_job(kind, {kind.replica_types[-1]: 2})
    del job["spec"]["runPolicy"]
    verdict = review_job(request_for(copy.deepcopy(job)), lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": C.MULTIKUEUE_MANAGED_BY},
    ]
    prepared, warnings = jobfiles.prepare(job, queue="lq")
    assert prepared["spec"]["runPolicy"] == {"suspend": True} and not warnings
    assert "suspend" not in prepared["spec"]
