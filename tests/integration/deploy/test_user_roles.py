"""Roles for people (``deploy/roles``): applied for real on a full cluster, then asked of
kube-apiserver's own RBAC authorizer as the people they are for (``kubectl --as ... auth
can-i``: impersonation). An ML engineer bound to Kubernetes' ``edit`` in a namespace sees its
LocalQueues, Workloads and their pending positions and submits jobs, but neither changes
Workloads nor sees the cluster's queues and flavors; a batch admin does both; a batch user
bound by ``kfed-batch-user-role`` submits jobs and sees its queues."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync
from tests.integration.deploy.manifests import DEPLOY, kubectl

pytestmark = pytest.mark.full

NS = "team-ml"
ENGINEER, USER, ADMIN = "alice@example.com", "bob@example.com", "carol@example.com"


def run(
    kubeconfig: str, *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl(), "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
        input=stdin,
    )


K, V = "kueue.x-k8s.io", "visibility.kueue.x-k8s.io"
CASES: list[tuple[str, str, str, str, bool, bool]] = [
    # who, verb, group, resource[/subresource], namespaced, allowed
    (ENGINEER, "list", K, "localqueues", True, True),
    (ENGINEER, "watch", K, "workloads", True, True),
    (ENGINEER, "get", V, "localqueues/pendingworkloads", True, True),
    (ENGINEER, "create", "batch", "jobs", True, True),
    (ENGINEER, "create", "jobset.x-k8s.io", "jobsets", True, True),
    (ENGINEER, "create", "trainer.kubeflow.org", "trainjobs", True, True),
    (ENGINEER, "create", "kubeflow.org", "pytorchjobs", True, True),
    (ENGINEER, "create", "kubeflow.org", "tfjobs", True, True),
    (USER, "patch", "kubeflow.org", "xgboostjobs", True, True),
    (ENGINEER, "get", "kubeflow.org", "paddlejobs/status", True, True),
    (ENGINEER, "create", "kubeflow.org", "jaxjobs", True, True),
    (ENGINEER, "create", "kubeflow.org", "mpijobs", True, True),
    (USER, "create", "kubeflow.org", "mpijobs", True, True),
    (ENGINEER, "create", "leaderworkerset.x-k8s.io", "leaderworkersets", True, True),
    (USER, "patch", "leaderworkerset.x-k8s.io", "leaderworkersets", True, True),
    (ENGINEER, "get", "leaderworkerset.x-k8s.io", "leaderworkersets/status", True, True),
    # Serving kinds: Kubernetes' own edit role has them (kfed's roles add nothing).
    (ENGINEER, "create", "apps", "statefulsets", True, True),
    (ENGINEER, "create", "apps", "deployments", True, True),
    (ENGINEER, "update", K, "workloads", True, False),
    (ENGINEER, "create", K, "localqueues", True, False),
    (ENGINEER, "list", K, "clusterqueues", False, False),
    (ENGINEER, "list", K, "multikueueclusters", False, False),
    (USER, "list", K, "workloads", True, True),
    (USER, "create", "batch", "jobs", True, True),
    (USER, "delete", K, "workloads", True, False),
    (ADMIN, "list", K, "clusterqueues", False, True),
    (ADMIN, "create", K, "resourceflavors", False, True),
    (ADMIN, "delete", K, "workloads", True, True),
    (ADMIN, "update", K, "multikueueclusters", False, True),
]


@pytest.fixture(scope="module")
def manager(single_cluster: LocalCluster) -> Iterator[str]:
    # A full cluster: Kubernetes' view/edit/admin roles are aggregated by the
    # controller-manager's clusterrole-aggregation controller, which a lite cluster lacks.
    kubeconfig = str(single_cluster.kubeconfig)
    run(kubeconfig, "apply", "-k", str(DEPLOY / "roles"))
    run(kubeconfig, "create", "namespace", NS, check=False)
    run(
        kubeconfig,
        "-n",
        NS,
        "create",
        "rolebinding",
        "engineer",
        "--clusterrole=edit",
        f"--user={ENGINEER}",
    )
    run(
        kubeconfig,
        "-n",
        NS,
        "create",
        "rolebinding",
        "batch-user",
        "--clusterrole=kfed-batch-user-role",
        f"--user={USER}",
    )
    run(
        kubeconfig,
        "create",
        "clusterrolebinding",
        "kfed-test-batch-admin",
        "--clusterrole=kfed-batch-admin-role",
        f"--user={ADMIN}",
    )
    # The controller-manager aggregates the roles a while after they are applied (each
    # aggregated role on its own): wait until every permission granted below is in place.
    wait_for_sync(
        lambda: all(
            can(kubeconfig, who, verb, group, res, namespaced)
            for who, verb, group, res, namespaced, expected in CASES
            if expected
        ),
        timeout=90,
        what="kfed's roles aggregated into edit, kfed-batch-user-role and kfed-batch-admin-role",
    )
    try:
        yield kubeconfig
    finally:
        run(kubeconfig, "delete", "namespace", NS, "--wait=false", check=False)
        run(kubeconfig, "delete", "clusterrolebinding", "kfed-test-batch-admin", check=False)
        run(kubeconfig, "delete", "-k", str(DEPLOY / "roles"), check=False)


def can(kubeconfig: str, who: str, verb: str, group: str, resource: str, namespaced: bool) -> bool:
    """Asked of the RBAC authorizer as ``who``: a SubjectAccessReview with the exact group and
    subresource (kinds whose CRD the cluster does not serve are asked the same way)."""
    plural, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": plural}
    if subresource:
        attributes["subresource"] = subresource
    if namespaced:
        attributes["namespace"] = NS
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": who, "groups": ["system:authenticated"], "resourceAttributes": attributes},
    }
    done = run(kubeconfig, "create", "-f", "-", "-o", "json", stdin=json.dumps(review))
    return bool(json.loads(done.stdout)["status"].get("allowed"))


@pytest.mark.parametrize(
    ("who", "verb", "group", "resource", "namespaced", "expected"),
    CASES,
    ids=[f"{c[0].split('@')[0]}-{c[1]}-{c[3]}" for c in CASES],
)
def test_what_people_may_do(
    manager: str, who: str, verb: str, group: str, resource: str, namespaced: bool, expected: bool
) -> None:
    assert can(manager, who, verb, group, resource, namespaced) is expected


def test_an_engineer_bound_to_edit_lists_their_queues_as_themselves(manager: str) -> None:
    """Impersonated for real (kubectl --as): the engineer lists the namespace's LocalQueues
    and Workloads, and is refused the cluster's ClusterQueues."""
    ok = run(manager, "--as", ENGINEER, "-n", NS, "get", "localqueues,workloads", check=False)
    assert ok.returncode == 0, ok.stderr
    refused = run(manager, "--as", ENGINEER, "get", "clusterqueues", check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr, refused.stderr
