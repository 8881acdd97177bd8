"""Is a ClusterQueue federated, through which check, to which worker clusters: the one answer
every part of kfed asks (admission, dispatch, webhook, CLI, dashboard).

Upstream's rules: a ClusterQueue's checks are ``spec.admissionChecksStrategy.admissionChecks``
(v1beta2 has no ``spec.admissionChecks`` list); a check is MultiKueue's when its
``spec.controllerName`` is ``kueue.x-k8s.io/multikueue``, and its parameters name a
MultiKueueConfig, whose ``spec.clusters`` are the workers. Two MultiKueue checks on one
ClusterQueue, or one limited to some flavors (``onFlavors``), is a misconfiguration that keeps
the ClusterQueue inactive: part of its workloads would otherwise run on the manager itself.

The functions read objects through lookups (name -> object or None), so informer caches and
a CLI's one-off LISTs give the same answer.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api.view import annotations_of, at, items

Obj = dict[str, Any]
Lookup = Callable[[str], Obj | None]


def _spec(obj: Obj | None) -> Mapping[str, Any]:
    return at(obj, "spec")


def check_rules(cluster_queue: Obj | None) -> list[dict[str, Any]]:
    """The ClusterQueue's ``admissionChecksStrategy.admissionChecks`` entries, in order."""
    rules = items(cluster_queue, "spec", "admissionChecksStrategy", "admissionChecks")
    return [rule for rule in rules if rule.get("name")]


def check_names(cluster_queue: Obj | None) -> list[str]:
    """The checks every workload of this ClusterQueue must pass."""
    return [str(rule["name"]) for rule in check_rules(cluster_queue)]


def check_controllers(cluster_queue: Obj | None, admission_check: Lookup) -> frozenset[str]:
    """The controllers (``spec.controllerName``) of the ClusterQueue's existing checks."""
    checks = (admission_check(name) for name in check_names(cluster_queue))
    return frozenset(str(n) for c in checks if (n := _spec(c).get("controllerName")))


REASON_PATH_LOCATION = "KubeConfigPathNotAllowed"


@dataclass(frozen=True, slots=True)
class KubeconfigSource:
    """Where a MultiKueueCluster's kubeconfig is, as kfed reads it: the name of a Secret in
    kfed's namespace (key ``kubeconfig``), or why kfed cannot read it (reason, message)."""

    secret: str | None
    problem: tuple[str, str] | None = None


def kubeconfig_source(mk_cluster: Obj | None) -> KubeconfigSource:
    """The one reading of ``spec.clusterSource`` (manager, CLI, drills): the kubeconfig
    Secret's name; a ``clusterProfileRef`` has none (the manager's registry reads those,
    manager/federation/workers/profilesource.py), and a ``Path`` location is refused."""
    source = at(mk_cluster, "spec", "clusterSource")
    if source.get("clusterProfileRef"):
        return KubeconfigSource(
            None,
            (
                C.REASON_BAD_CLUSTER_PROFILE,
                "registered by a ClusterProfile: it has no kubeconfig Secret",
            ),
        )
    kc = at(source, "kubeConfig")
    if kc.get("locationType", "Secret") != "Secret":
        return KubeconfigSource(
            None,
            (
                REASON_PATH_LOCATION,
                "kubeConfig locationType Path is not supported by kfed: store it in a Secret",
            ),
        )
    location = str(kc.get("location") or "")
    if not location:
        return KubeconfigSource(None, ("BadKubeConfig", "kubeConfig names no Secret (location)"))
    return KubeconfigSource(location)


def is_multikueue_check(admission_check: Obj | None) -> bool:
    return _spec(admission_check).get("controllerName") == C.MULTIKUEUE_CONTROLLER_NAME


def config_name(admission_check: Obj | None) -> str:
    """The MultiKueueConfig a MultiKueue check names ("" when its parameters name none)."""
    params = at(admission_check, "spec", "parameters")
    if params.get("kind") != "MultiKueueConfig":
        return ""
    return str(params.get("name") or "")


@dataclass(frozen=True, slots=True)
class Federation:
    check: str
    """The ClusterQueue's MultiKueue AdmissionCheck."""
    config: str
    """The MultiKueueConfig it names ("" when none)."""
    clusters: tuple[str, ...]
    """The config's workers in its order (empty when the config is missing)."""
    problem: tuple[str, str] | None
    """(reason, message) when the ClusterQueue is misconfigured for MultiKueue."""


def configuration_problem(
    cluster_queue: Obj | None, admission_check: Lookup
) -> tuple[str, str] | None:
    """Upstream's two MultiKueue misconfigurations, with its reasons and messages."""
    multikueue = [
        rule
        for rule in check_rules(cluster_queue)
        if is_multikueue_check(admission_check(rule["name"]))
    ]
    if len(multikueue) > 1:
        return (
            C.REASON_MULTIPLE_MULTIKUEUE_CHECKS,
            "Can't admit new workloads: Cannot use multiple MultiKueue AdmissionChecks on "
            f"the same ClusterQueue, found: {','.join(r['name'] for r in multikueue)}.",
        )
    per_flavor = [str(rule["name"]) for rule in multikueue if rule.get("onFlavors")]
    if per_flavor:
        return (
            C.REASON_MULTIKUEUE_CHECK_PER_FLAVOR,
            "Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per "
            f"flavor, found: {','.join(per_flavor)}.",
        )
    return None


def federation_of(
    cluster_queue: Obj | None, admission_check: Lookup, multikueue_config: Lookup
) -> Federation | None:
    """The ClusterQueue's federation (its first MultiKueue check), or None when its workloads
    run on the manager."""
    for name in check_names(cluster_queue):
        check = admission_check(name)
        if not is_multikueue_check(check):
            continue
        config = config_name(check)
        clusters = _spec(multikueue_config(config) if config else None).get("clusters") or []
        return Federation(
            name,
            config,
            tuple(str(c) for c in clusters),
            configuration_problem(cluster_queue, admission_check),
        )
    return None


def bound_namespaces(multikueue_cluster: Obj | None) -> tuple[str, ...] | None:
    """The namespace patterns of a worker's ``kfed.io/namespaces`` annotation; None when it
    has none (every namespace may run there). An empty value binds nothing."""
    value = annotations_of(multikueue_cluster).get(C.NAMESPACES_ANNOTATION)
    if value is None:
        return None
    return tuple(p.strip() for p in str(value).split(",") if p.strip())


def namespace_bound(multikueue_cluster: Obj | None, namespace: str) -> bool:
    """May workloads of manager namespace ``namespace`` run on this worker (in the namespace
    of the same name there)?"""
    patterns = bound_namespaces(multikueue_cluster)
    return patterns is None or any(fnmatch.fnmatchcase(namespace, p) for p in patterns)


def maintenance_of(multikueue_cluster: Obj | None) -> str:
    """A worker's maintenance mode from kfed's ``kfed.io/maintenance`` annotation: "" (none),
    ``cordon`` or ``drain``. Any other value counts as ``cordon``: a mistyped value errs on
    the side of sending nothing there, and every part of kfed reads it the same way."""
    mode = str(annotations_of(multikueue_cluster).get(C.MAINTENANCE_ANNOTATION) or "")
    if mode in ("", C.MAINTENANCE_DRAIN):
        return mode
    return C.MAINTENANCE_CORDON
