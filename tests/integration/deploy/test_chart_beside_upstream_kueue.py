"""charts/kfed beside upstream Kueue v0.17.0 installed by upstream's own Helm chart (release
``kueue`` in kueue-system, from the module copy build-kueue.sh keeps beside the binary), on a
real control plane of its own (kube-apiserver, etcd and kube-controller-manager, whose
clusterrole-aggregation controller fills aggregated ClusterRoles; no kubelet: upstream's
Deployment never runs, only objects matter).

- The documented ``helm install kfed charts/kfed -n kueue-system --create-namespace`` (and the
  fence-only worker side of docs/migrate.md) succeeds beside upstream's release, then ``helm
  upgrade`` and ``helm uninstall``: after each, upstream's two visibility APIServices are
  upstream's as they were (same object, annotations, spec) and every ClusterRole of upstream's
  release grants exactly what it granted before kfed came (kfed's roles for people gather into
  kfed's own aggregated roles, never into upstream's kueue-batch-admin-role or
  kueue-batch-user-role).
- docs/migrate.md's Helm path: upstream's controller scaled to zero, its webhook
  configurations and visibility APIServices deleted, kfed's manager side installed without
  kfed-crds (its own APIServices now; upstream's CRDs and roles as they were), and back: kfed
  uninstalled, upstream's release upgraded with its values, which brings its webhook
  configurations and APIServices back, and its controller scaled up again.

Its own bed (a module fixture): upstream's CRDs must not meet the shared beds' kfed CRDs.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e import binaries
from e2e.local.cluster import LocalCluster
from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for_sync
from tests.integration.deploy.chart import (
    CHART,
    NAMESPACE,
    UPSTREAM_RELEASE,
    members,
    upstream_chart,
)

pytestmark = pytest.mark.full

APISERVICES = ("v1beta1.visibility.kueue.x-k8s.io", "v1beta2.visibility.kueue.x-k8s.io")
KEPT_ROLES = ("kfed-batch-admin-role", "kfed-batch-user-role")
"""kfed's aggregated roles for people, which helm uninstall keeps (deploy/roles)."""
UPSTREAM_WEBHOOKS = (
    ("mutatingwebhookconfiguration", "kueue-mutating-webhook-configuration"),
    ("validatingwebhookconfiguration", "kueue-validating-webhook-configuration"),
)
UPSTREAM_DEPLOYMENT = "kueue-controller-manager"

Obj = dict[str, Any]
Grant = tuple[str, ...]


def helm(cluster: LocalCluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(binaries.helm_path()), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check:
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stderr}"
    return result


def get(cluster: LocalCluster, *args: str) -> Obj:
    found: Obj = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return found


def grants(role: Obj) -> frozenset[Grant]:
    """What a ClusterRole's rules grant, one (group, resource, name, verb) or (URL, verb) each,
    whatever the rules' order and grouping."""
    found: set[Grant] = set()
    for rule in role.get("rules") or []:
        for verb in rule.get("verbs") or []:
            found.update(("url", url, verb) for url in rule.get("nonResourceURLs") or [])
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for name in rule.get("resourceNames") or ["(any)"]:
                        found.add((group, resource, name, verb))
    return frozenset(found)


def summary(found: frozenset[Grant]) -> dict[str, list[str]]:
    """Grants by resource (``group/resource``): their verbs."""
    verbs: dict[str, set[str]] = {}
    for grant in found:
        verbs.setdefault("/".join(grant[:-1]).removesuffix("/(any)"), set()).add(grant[-1])
    return {resource: sorted(v) for resource, v in sorted(verbs.items())}


def settled_cluster_roles(cluster: LocalCluster) -> list[Obj]:
    """Every ClusterRole, once each aggregated one grants exactly what its members do now (the
    controller-manager aggregates a while after a member changes)."""

    def check() -> list[Obj] | None:
        roles: list[Obj] = get(cluster, "clusterroles")["items"]
        for role in roles:
            if role.get("aggregationRule"):
                gathered = frozenset().union(*(grants(m) for m in members(role, roles)))
                if grants(role) != gathered:
                    return None
        return roles

    return wait_for_sync(check, timeout=60, interval=0.5, what="every ClusterRole aggregated")


def owned_by(obj: Obj, release: str) -> bool:
    annotations = obj["metadata"].get("annotations") or {}
    return bool(annotations.get("meta.helm.sh/release-name") == release)


def upstream_grants(cluster: LocalCluster) -> dict[str, frozenset[Grant]]:
    """What each ClusterRole of upstream's release grants, by name, once aggregation settled."""
    return {
        role["metadata"]["name"]: grants(role)
        for role in settled_cluster_roles(cluster)
        if owned_by(role, UPSTREAM_RELEASE)
    }


def apiservices(cluster: LocalCluster) -> dict[str, Obj]:
    """The visibility APIServices as far as their owner writes them (status aside)."""
    found = {}
    for name in APISERVICES:
        obj = get(cluster, "apiservice", name)
        meta = obj["metadata"]
        found[name] = {
            "uid": meta["uid"],
            "labels": meta.get("labels"),
            "annotations": meta.get("annotations"),
            "spec": obj["spec"],
        }
    return found


@dataclass(frozen=True, slots=True)
class Upstream:
    cluster: LocalCluster
    grants: dict[str, frozenset[Grant]]
    """What upstream's ClusterRoles granted before kfed came."""
    apiservices: dict[str, Obj]
    """Upstream's visibility APIServices as its release made them."""
    crds: dict[str, str]
    """Upstream's CRDs: name -> uid."""

    def assert_untouched(self, step: str, *, apiservices_before: dict[str, Obj] | None) -> None:
        """Upstream's roles grant what they did, its CRDs are the same objects, and (unless
        None) its APIServices are ``apiservices_before``, the same objects."""
        if apiservices_before is not None:
            assert apiservices(self.cluster) == apiservices_before, (
                f"{step}: upstream's visibility APIServices changed"
            )
        now = upstream_grants(self.cluster)
        assert sorted(now) == sorted(self.grants), f"{step}: upstream's ClusterRoles changed"
        changed = {
            name: {"gained": summary(now[name] - self.grants[name]),
                   "lost": summary(self.grants[name] - now[name])}
            for name in now
            if now[name] != self.grants[name]
        }  # fmt: skip
        assert not changed, f"{step}: upstream's roles grant otherwise now: {changed}"
        assert kueue_crds(self.cluster) == self.crds, f"{step}: upstream's CRDs changed"


def kueue_crds(cluster: LocalCluster) -> dict[str, str]:
    return {
        crd["metadata"]["name"]: crd["metadata"]["uid"]
        for crd in get(cluster, "crd")["items"]
        if crd["spec"]["group"] == "kueue.x-k8s.io" and owned_by(crd, UPSTREAM_RELEASE)
    }


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """A full control plane of this module's own (upstream's CRDs must not meet the shared
    beds' kfed CRDs) with upstream Kueue's release installed by upstream's chart."""
    chart = upstream_chart()
    fed = LocalFederation(
        "beside-upstream",
        workers=0,
        full=True,
        dra=False,
        root=tmp_path_factory.mktemp(f"kfed-{os.getpid()}"),
        tie_to_parent=True,
    )
    fed.up()
    try:
        cluster = fed.cluster("manager")
        helm(
            cluster, "install", UPSTREAM_RELEASE, str(chart), "-n", NAMESPACE, "--create-namespace"
        )
        baseline = Upstream(
            cluster=cluster,
            grants=upstream_grants(cluster),
            apiservices=apiservices(cluster),
            crds=kueue_crds(cluster),
        )
        # What the test stands on: upstream's release owns both APIServices, its two
        # aggregated roles for people, and its CRDs.
        assert all(owned_by(get(cluster, "apiservice", n), UPSTREAM_RELEASE) for n in APISERVICES)
        assert {"kueue-batch-admin-role", "kueue-batch-user-role"} <= set(baseline.grants)
        assert baseline.grants["kueue-batch-admin-role"], "upstream's batch admin role is empty"
        assert len(baseline.crds) >= 10
        yield baseline
    finally:
        fed.down()


def remove_kfed(cluster: LocalCluster) -> None:
    helm(cluster, "uninstall", "kfed", "-n", NAMESPACE, check=False)
    cluster.kubectl("delete", "clusterrole", *KEPT_ROLES, "--ignore-not-found")


@dataclass(frozen=True, slots=True)
class Side:
    values: tuple[str, ...]
    key: str
    """The side's key in the chart's values."""
    deployment: str


SIDES = {
    # The documented install of the manager side (README.md, docs/install.md, docs/migrate.md).
    "manager": Side((), "manager", "kfed-manager"),
    # docs/migrate.md: kfed's fence-only side beside upstream Kueue on a worker.
    "fence-only-worker": Side(
        ("--set", "side=worker", "--set", "worker.mode=fence-only"), "worker", "kfed-worker-shim"
    ),
}


@pytest.mark.parametrize("side", sorted(SIDES))
def test_helm_install_upgrade_uninstall_beside_upstream_s_release_leaves_its_apiservices_and_roles(
    upstream: Upstream, side: str
) -> None:
    cluster = upstream.cluster
    chosen = SIDES[side]
    before = apiservices(cluster)
    assert all(owned_by(get(cluster, "apiservice", n), UPSTREAM_RELEASE) for n in APISERVICES)
    try:
        installed = helm(
            cluster, "install", "kfed", str(CHART), "-n", NAMESPACE, "--create-namespace",
            *chosen.values, check=False,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        manifest = helm(cluster, "get", "manifest", "kfed", "-n", NAMESPACE).stdout
        assert "kind: APIService" not in manifest
        if side == "manager":
            assert f"belongs to Helm release {UPSTREAM_RELEASE} in namespace" in installed.stdout
        get(cluster, "deployment", "-n", NAMESPACE, chosen.deployment)
        upstream.assert_untouched("after helm install kfed", apiservices_before=before)

        # The documented upgrade, with the PodDisruptionBudget turned on and its minAvailable.
        helm(
            cluster, "upgrade", "kfed", str(CHART), "-n", NAMESPACE, "--reuse-values",
            "--set", f"{chosen.key}.podDisruptionBudget.enabled=true",
            "--set", f"{chosen.key}.podDisruptionBudget.minAvailable=2",
        )  # fmt: skip
        (budget,) = get(cluster, "poddisruptionbudgets", "-n", NAMESPACE)["items"]
        assert budget["spec"]["minAvailable"] == 2
        upstream.assert_untouched("after helm upgrade kfed", apiservices_before=before)

        helm(cluster, "uninstall", "kfed", "-n", NAMESPACE)
        upstream.assert_untouched("after helm uninstall kfed", apiservices_before=before)
    finally:
        remove_kfed(cluster)


def without_uid(found: dict[str, Obj]) -> dict[str, Obj]:
    return {name: {k: v for k, v in obj.items() if k != "uid"} for name, obj in found.items()}


def restore_upstream(cluster: LocalCluster, replicas: int) -> None:
    """Upstream's release as its chart makes it (what a step deleted, created again; its
    values kept), its controller scaled back."""
    helm(cluster, "upgrade", UPSTREAM_RELEASE, str(upstream_chart()), "-n", NAMESPACE,
         "--reuse-values")  # fmt: skip
    cluster.kubectl(
        "-n", NAMESPACE, "scale", "deployment", UPSTREAM_DEPLOYMENT, f"--replicas={replicas}"
    )  # fmt: skip


def test_migrate_md_helm_path_manager_first_and_back(upstream: Upstream) -> None:
    """docs/migrate.md, "The manager first", steps 3 and 4 with upstream installed by its own
    chart, the visibility API handed over to kfed's manager, and "And back"."""
    cluster = upstream.cluster
    replicas = get(cluster, "deployment", "-n", NAMESPACE, UPSTREAM_DEPLOYMENT)["spec"]["replicas"]
    try:
        # Step 3: stop upstream's controller, remove its webhook configurations and, for kfed's
        # manager to serve the visibility API, its two APIServices; keep the rest (CRDs).
        cluster.kubectl("-n", NAMESPACE, "scale", "deployment", UPSTREAM_DEPLOYMENT, "--replicas=0")
        for kind, name in UPSTREAM_WEBHOOKS:
            cluster.kubectl("delete", kind, name)
        cluster.kubectl("delete", "apiservice", *APISERVICES)
        # Step 4: kfed's manager side, without kfed-crds: its APIServices, for its Service.
        helm(cluster, "install", "kfed", str(CHART), "-n", NAMESPACE, "--create-namespace")
        get(cluster, "deployment", "-n", NAMESPACE, "kfed-manager")
        for name in APISERVICES:
            apiservice = get(cluster, "apiservice", name)
            assert owned_by(apiservice, "kfed"), name
            assert apiservice["spec"]["service"]["name"] == "kfed-manager"
        upstream.assert_untouched("kfed installed in upstream's place", apiservices_before=None)

        # And back: kfed's release gone (and the webhook configuration its manager registers,
        # had one run), upstream's webhook configurations, APIServices and controller back.
        helm(cluster, "uninstall", "kfed", "-n", NAMESPACE)
        cluster.kubectl(
            "delete", "mutatingwebhookconfiguration", "kfed-manager", "--ignore-not-found"
        )
        restore_upstream(cluster, replicas)
        for kind, name in UPSTREAM_WEBHOOKS:
            assert owned_by(get(cluster, kind, name), UPSTREAM_RELEASE), f"{kind} {name}"
        assert without_uid(apiservices(cluster)) == without_uid(upstream.apiservices)
        deployment = get(cluster, "deployment", "-n", NAMESPACE, UPSTREAM_DEPLOYMENT)
        assert deployment["spec"]["replicas"] == replicas
        upstream.assert_untouched("upstream back, kfed gone", apiservices_before=None)
    finally:
        remove_kfed(cluster)
        restore_upstream(cluster, replicas)
