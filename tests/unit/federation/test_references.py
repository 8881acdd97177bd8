"""A worker's ``kfed.io/allowed-references``: the objects a job's pods use are found wherever a
pod spec puts them, and a job goes there only if the worker's rules allow every one of them
(manager/federation/decisions/references.py; docs/security.md)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manager.api import constants as C
from manager.cli import workerlook
from manager.federation.decisions import capacity
from manager.federation.decisions import references as refs
from manager.federation.decisions.references import Kind, Malformed, Reference, Rule, Rules
from manager.federation.engine.placing import PlacingReader
from manager.federation.engine.records import ToldRefusals
from manager.federation.engine.topologyview import TopologyView

NS = "team-a"


def ref(kind: Kind, name: str, namespace: str = NS) -> Reference:
    return Reference(kind, namespace, name)


def rules(value: str) -> Rules:
    parsed = refs.parse(value)
    assert isinstance(parsed, Rules), parsed
    return parsed


def cluster(value: str | None) -> dict[str, Any]:
    annotations = {} if value is None else {refs.ANNOTATION: value}
    return {"metadata": {"name": "worker-1", "annotations": annotations}}


# -- the annotation ----------------------------------------------------------------------------


def test_rules_are_kind_namespace_and_name_separated_by_commas_or_whitespace() -> None:
    parsed = rules("serviceaccount:*/default, configmap:*/shared-*\n  secret:team-a/*")
    assert parsed.rules == (
        Rule(Kind.SERVICE_ACCOUNT, "*", "default"),
        Rule(Kind.CONFIG_MAP, "*", "shared-*"),
        Rule(Kind.SECRET, "team-a", "*"),
    )
    assert parsed.allows(ref(Kind.SECRET, "db-password"))
    assert not parsed.allows(ref(Kind.SECRET, "db-password", "team-b"))
    assert parsed.allows(ref(Kind.CONFIG_MAP, "shared-settings", "team-b"))
    assert not parsed.allows(ref(Kind.CONFIG_MAP, "settings"))
    assert parsed.allows(ref(Kind.SERVICE_ACCOUNT, "default", "team-b"))
    assert not parsed.allows(ref(Kind.SERVICE_ACCOUNT, "admin"))


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("Secret", Kind.SECRET),
        ("secrets", Kind.SECRET),
        ("cm", Kind.CONFIG_MAP),
        ("ConfigMaps", Kind.CONFIG_MAP),
        ("sa", Kind.SERVICE_ACCOUNT),
        ("pvc", Kind.PERSISTENT_VOLUME_CLAIM),
        ("persistentvolumeclaim", Kind.PERSISTENT_VOLUME_CLAIM),
    ],
)
def test_a_kind_may_be_named_as_kubectl_names_it(word: str, kind: Kind) -> None:
    assert rules(f"{word}:a/b").rules == (Rule(kind, "a", "b"),)


def test_the_any_kind_matches_every_kind_and_an_empty_value_allows_nothing() -> None:
    anything_of_team_a = rules("*:team-a/*")
    assert all(anything_of_team_a.allows(ref(kind, "x")) for kind in Kind)
    assert not anything_of_team_a.allows(ref(Kind.SECRET, "x", "team-b"))
    assert rules("").rules == () and rules(" , \n").rules == ()
    assert not rules("").allows(ref(Kind.SERVICE_ACCOUNT, "default"))


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("secret", "expected KIND:NAMESPACE/NAME"),
        ("secret:team-a", "expected KIND:NAMESPACE/NAME"),
        ("secrt:team-a/x", "unknown kind 'secrt'"),
        (":team-a/x", "unknown kind ''"),
        ("secret:Team-A/x", "the namespace pattern 'Team-A'"),
        ("secret:team-a/", "the name pattern ''"),
        ("secret:/x", "the namespace pattern ''"),
        ("secret:a/b/c", "the name pattern 'b/c'"),
        ("secret:a/b, configmap:a", "rule 'configmap:a'"),
    ],
)
def test_a_malformed_annotation_names_the_rule_and_what_is_wrong(value: str, problem: str) -> None:
    parsed = refs.parse(value)
    assert isinstance(parsed, Malformed)
    assert problem in parsed.problem


def test_the_policy_of_a_worker_is_open_without_the_annotation() -> None:
    assert refs.policy_of(None) is None
    assert refs.policy_of(cluster(None)) is None
    assert refs.policy_of(cluster("secret:*/*")) == rules("secret:*/*")
    assert isinstance(refs.policy_of(cluster("nonsense")), Malformed)


# -- what pods use -------------------------------------------------------------------------------


def test_every_place_a_pod_spec_names_an_object_is_found() -> None:
    spec = {
        "serviceAccountName": "trainer",
        "imagePullSecrets": [{"name": "registry"}],
        "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "init-env"}}]}],
        "containers": [
            {
                "name": "c",
                "env": [
                    {"name": "A", "value": "plain"},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "db", "key": "k"}}},
                    {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}},
                    {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "envFrom": [{"secretRef": {"name": "env-secret"}}],
            }
        ],
        "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "debug"}}]}],
        "volumes": [
            {"name": "1", "secret": {"secretName": "mounted"}},
            {"name": "2", "configMap": {"name": "mounted-cm"}},
            {"name": "3", "persistentVolumeClaim": {"claimName": "datasets"}},
            {
                "name": "4",
                "projected": {
                    "sources": [
                        {"secret": {"name": "projected"}},
                        {"configMap": {"name": "projected-cm"}},
                        {"serviceAccountToken": {"path": "token"}},
                    ]
                },
            },
            {"name": "5", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
            {"name": "6", "azureFile": {"secretName": "azure", "shareName": "s"}},
            {"name": "7", "rbd": {"monitors": [], "image": "i", "secretRef": {"name": "ceph"}}},
            {"name": "8", "emptyDir": {}},
        ],
    }
    assert refs.of_pod_spec(spec, NS) == {
        ref(Kind.SERVICE_ACCOUNT, "trainer"),
        ref(Kind.SECRET, "registry"),
        ref(Kind.CONFIG_MAP, "init-env"),
        ref(Kind.SECRET, "db"),
        ref(Kind.CONFIG_MAP, "cfg"),
        ref(Kind.SECRET, "env-secret"),
        ref(Kind.SECRET, "debug"),
        ref(Kind.SECRET, "mounted"),
        ref(Kind.CONFIG_MAP, "mounted-cm"),
        ref(Kind.PERSISTENT_VOLUME_CLAIM, "datasets"),
        ref(Kind.SECRET, "projected"),
        ref(Kind.CONFIG_MAP, "projected-cm"),
        ref(Kind.SECRET, "csi"),
        ref(Kind.SECRET, "azure"),
        ref(Kind.SECRET, "ceph"),
    }


def test_a_pod_without_a_service_account_runs_as_default() -> None:
    assert refs.of_pod_spec({"containers": [{"name": "c"}]}, NS) == {
        ref(Kind.SERVICE_ACCOUNT, "default")
    }
    # The deprecated field still names it.
    assert refs.of_pod_spec({"serviceAccount": "old", "containers": []}, NS) == {
        ref(Kind.SERVICE_ACCOUNT, "old")
    }


def pod(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c"}], **spec}}


def test_pod_specs_are_found_however_a_job_kind_nests_them() -> None:
    job = {"spec": {"template": pod(serviceAccountName="job-sa")}}
    job_set = {
        "spec": {
            "replicatedJobs": [
                {"name": "a", "template": {"spec": {"template": pod(serviceAccountName="a")}}},
                {"name": "b", "template": {"spec": {"template": pod(serviceAccountName="b")}}},
            ]
        }
    }
    ray_cluster = {
        "spec": {
            "headGroupSpec": {"template": pod(serviceAccountName="head")},
            "workerGroupSpecs": [{"template": pod(serviceAccountName="worker")}],
        }
    }
    workload = {"spec": {"podSets": [{"name": "main", "count": 1, "template": pod()}]}}
    accounts = {r.name for r in refs.of_objects(NS, [job, job_set, ray_cluster, workload, None])}
    assert accounts == {"job-sa", "a", "b", "head", "worker", "default"}


def test_a_pod_field_beside_a_nested_template_is_found_too() -> None:
    odd_kind = {"spec": {"serviceAccountName": "launcher", "template": pod()}}
    assert refs.of_objects(NS, [odd_kind]) == {
        ref(Kind.SERVICE_ACCOUNT, "launcher"),
        ref(Kind.SERVICE_ACCOUNT, "default"),
    }


def test_only_the_spec_is_read_and_odd_values_are_skipped() -> None:
    odd = {
        "metadata": {"annotations": {"x": "y"}, "volumes": [{"secret": {"secretName": "no"}}]},
        "spec": {
            "template": {
                "spec": {
                    "containers": ["not a container", {"env": "not a list"}],
                    "volumes": [None, {"secret": "not a dict"}, {"secret": {"secretName": 3}}],
                    "imagePullSecrets": "registry",
                    "serviceAccountName": None,
                }
            }
        },
    }
    assert refs.of_objects(NS, [odd]) == {ref(Kind.SERVICE_ACCOUNT, "default")}


# -- the verdict -------------------------------------------------------------------------------


def test_the_refusal_names_what_is_not_allowed_for_which_namespace_where() -> None:
    used = {ref(Kind.SECRET, "db-password"), ref(Kind.SERVICE_ACCOUNT, "default")}
    policy = rules("serviceaccount:*/default")
    assert refs.refusal(policy, used, namespace=NS, worker="worker-1") == (
        "Secret team-a/db-password is not allowed for namespace team-a on worker-1 "
        "(kfed.io/allowed-references)"
    )
    assert refs.refusal(rules("*:*/*"), used, namespace=NS, worker="w") is None
    assert refs.refusal(None, used, namespace=NS, worker="w") is None


def test_many_refusals_are_named_up_to_three() -> None:
    used = {ref(Kind.SECRET, f"s{i}") for i in range(5)}
    message = refs.refusal(rules(""), used, namespace=NS, worker="w")
    assert message == (
        "Secret team-a/s0, Secret team-a/s1, Secret team-a/s2 and 2 more are not allowed for "
        "namespace team-a on w (kfed.io/allowed-references)"
    )


def test_a_malformed_annotation_refuses_everything_with_its_problem() -> None:
    policy = refs.parse("secret:team-a/*, configmap")
    assert isinstance(policy, Malformed)
    assert refs.refused(policy, {ref(Kind.SECRET, "x")}) == [ref(Kind.SECRET, "x")]
    message = refs.refusal(policy, set(), namespace=NS, worker="w")
    assert message == (
        "its kfed.io/allowed-references cannot be read (rule 'configmap': expected "
        "KIND:NAMESPACE/NAME): it allows nothing until fixed"
    )


# -- properties --------------------------------------------------------------------------------

_names = st.from_regex(r"[a-c][a-c0-9-]{0,3}", fullmatch=True)
_globs = st.from_regex(r"(\*|[a-c0-9-])(\*|[a-c0-9-]){0,3}", fullmatch=True)
_kinds = st.sampled_from(list(Kind))
_references = st.builds(Reference, _kinds, _names, _names)
_rules = st.builds(Rule, st.none() | _kinds, _globs, _globs)


def _glob_matches(pattern: str, text: str) -> bool:
    """An oracle that knows only ``*``, written apart from fnmatch."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), text) is not None


def _oracle(rule: Rule, reference: Reference) -> bool:
    return (
        (rule.kind is None or rule.kind == reference.kind)
        and _glob_matches(rule.namespace, reference.namespace)
        and _glob_matches(rule.name, reference.name)
    )


@given(st.lists(_rules, max_size=5), st.sets(_references, max_size=6))
def test_a_reference_is_allowed_iff_some_rule_matches_it(
    rule_list: list[Rule], used: set[Reference]
) -> None:
    # Written out and read back, as an operator's annotation would be.
    policy = rules(",\n ".join(str(r) for r in rule_list))
    assert policy.rules == tuple(rule_list)
    expected = sorted(r for r in used if not any(_oracle(rule, r) for rule in rule_list))
    assert refs.refused(policy, used) == expected
    verdict = refs.refusal(policy, used, namespace=NS, worker="w")
    assert (verdict is None) == (not expected)


@given(st.text(max_size=40))
def test_any_annotation_value_is_read_without_raising(value: str) -> None:
    assert isinstance(refs.parse(value), Rules | Malformed)


def _place(reference: Reference, where: int) -> dict[str, Any]:
    """A pod-spec fragment that names ``reference`` in one of the ways its kind allows."""
    name = reference.name
    container_ways: dict[Kind, list[dict[str, Any]]] = {
        Kind.SECRET: [
            {"env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}}]},
            {"envFrom": [{"secretRef": {"name": name}}]},
        ],
        Kind.CONFIG_MAP: [
            {"env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": name}}}]},
            {"envFrom": [{"configMapRef": {"name": name}}]},
        ],
    }
    volume_ways: dict[Kind, list[dict[str, Any]]] = {
        Kind.SECRET: [
            {"secret": {"secretName": name}},
            {"projected": {"sources": [{"secret": {"name": name}}]}},
            {"csi": {"driver": "d", "nodePublishSecretRef": {"name": name}}},
            {"cephfs": {"monitors": [], "secretRef": {"name": name}}},
        ],
        Kind.CONFIG_MAP: [
            {"configMap": {"name": name}},
            {"projected": {"sources": [{"configMap": {"name": name}}]}},
        ],
        Kind.PERSISTENT_VOLUME_CLAIM: [{"persistentVolumeClaim": {"claimName": name}}],
    }
    ways: list[dict[str, Any]] = []
    for container_list in ("initContainers", "containers", "ephemeralContainers"):
        ways += [
            {container_list: [{"name": "c", **w}]} for w in container_ways.get(reference.kind, [])
        ]
    ways += [{"volumes": [{"name": "v", **w}]} for w in volume_ways.get(reference.kind, [])]
    if reference.kind is Kind.SECRET:
        ways.append({"imagePullSecrets": [{"name": name}]})
    if reference.kind is Kind.SERVICE_ACCOUNT:
        ways.append({"serviceAccountName": name})
    return ways[where % len(ways)]


def _merge(spec: dict[str, Any], fragment: dict[str, Any]) -> None:
    for key, value in fragment.items():
        if isinstance(value, list):
            spec.setdefault(key, []).extend(value)
        else:
            spec[key] = value


@given(
    st.lists(st.tuples(_kinds, _names, st.integers(0, 30)), max_size=8),
    st.sampled_from(["job", "jobset", "workload"]),
)
def test_extraction_finds_every_reference_placed_anywhere_in_a_pod_spec(
    placed: list[tuple[Kind, str, int]], shape: str
) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "i"}]}
    accounts = [(k, n, w) for k, n, w in placed if k is Kind.SERVICE_ACCOUNT][:1]
    others = [(k, n, w) for k, n, w in placed if k is not Kind.SERVICE_ACCOUNT]
    for kind, name, where in [*others, *accounts]:
        _merge(spec, _place(ref(kind, name), where))
    template = {"metadata": {"labels": {"a": "b"}}, "spec": spec}
    shapes: dict[str, dict[str, Any]] = {
        "job": {"spec": {"parallelism": 1, "template": template}},
        "jobset": {
            "spec": {
                "replicatedJobs": [{"name": "r", "template": {"spec": {"template": template}}}]
            }
        },
        "workload": {"spec": {"podSets": [{"name": "main", "count": 1, "template": template}]}},
    }
    obj = shapes[shape]
    expected = {ref(kind, name) for kind, name, _ in [*others, *accounts]}
    if not accounts:
        expected.add(ref(Kind.SERVICE_ACCOUNT, "default"))
    assert refs.of_objects(NS, [obj]) == expected


# -- where the verdict is used -------------------------------------------------------------------


def _placer(mk_clusters: dict[str, dict[str, Any]], job: dict[str, Any] | None) -> PlacingReader:
    look = SimpleNamespace(
        state=None,
        registry=SimpleNamespace(mk_clusters=mk_clusters),
        settings=None,
        records=None,
        manager_job=lambda obj: job,
    )
    return PlacingReader(cast(Any, look), ToldRefusals(), TopologyView())


def _workload() -> dict[str, Any]:
    return {
        "metadata": {"name": "job-x", "namespace": NS, "uid": "u1"},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": pod()}]},
    }


def test_the_dispatcher_refuses_with_the_reason_and_tells_it_once() -> None:
    """The group read finds the refusal every time; it is to be told (an Event, by the
    applier) only until the applier remembers telling it."""
    job = {
        "spec": {"template": pod(volumes=[{"name": "v", "secret": {"secretName": "db-password"}}])}
    }
    placer = _placer(
        {"worker-1": cluster("serviceaccount:*/default"), "worker-2": cluster(None)}, job
    )
    wl = _workload()
    expected = (
        "Secret team-a/db-password is not allowed for namespace team-a on worker-1 "
        "(kfed.io/allowed-references)"
    )
    told: list[tuple[str, str]] = []
    for _ in range(3):
        assert placer.references_refusal(wl, "worker-1") == expected
        assert placer.references_refusal(wl, "worker-2") is None
        untold = placer._untold(wl, {"worker-1": expected})
        for worker, refusal in untold:
            placer.told.remember(ToldRefusals.who(wl), worker, refusal)
        told += untold
    assert told == [("worker-1", expected)]


def test_the_dispatcher_reads_the_workload_pod_sets_when_the_job_is_gone() -> None:
    wl = _workload()
    wl["spec"]["podSets"][0]["template"]["spec"]["serviceAccountName"] = "admin"
    placer = _placer({"worker-1": cluster("serviceaccount:*/default")}, None)
    assert "ServiceAccount team-a/admin is not allowed" in (
        placer.references_refusal(wl, "worker-1") or ""
    )


class _ManagerApi:
    def __init__(self, mk_cluster: dict[str, Any]) -> None:
        self.mk_cluster = mk_cluster

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.mk_cluster


async def test_what_if_gives_the_same_reason_as_the_dispatcher() -> None:
    mk_cluster = cluster("serviceaccount:*/default")
    mk_cluster["status"] = {"conditions": [{"type": C.ACTIVE, "status": "True"}]}
    used = refs.of_objects(NS, [{"spec": {"template": pod(imagePullSecrets=[{"name": "reg"}])}}])
    candidate = await workerlook.evaluate_worker(
        cast(Any, _ManagerApi(mk_cluster)),
        "worker-1",
        0,
        request=capacity.Request(NS, "q", {}),
        manager_flavors={},
        namespace="kueue-system",
        allowed=None,
        used=used,
    )
    assert not candidate.fits and candidate.never
    assert candidate.reason == (
        "Secret team-a/reg is not allowed for namespace team-a on worker-1 "
        "(kfed.io/allowed-references)"
    )
