"""``kfed crds --apply``'s check: replacing an installed CRD (an upstream Kueue's, say) with
kfed's must not lose a version it serves or one its objects are stored as."""

from __future__ import annotations

from typing import Any

from manager.cli.crds import served, version_losses


def crd(*versions: tuple[str, bool], stored: tuple[str, ...] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
        "spec": {"versions": [{"name": n, "served": s} for n, s in versions]},
    }
    if stored:
        body["status"] = {"storedVersions": list(stored)}
    return body


KFED = crd(("v1beta2", True))
UPSTREAM = crd(("v1beta1", True), ("v1beta2", True), stored=("v1beta2",))


def test_kfed_over_kfed_loses_nothing() -> None:
    assert version_losses(crd(("v1beta2", True), stored=("v1beta2",)), KFED) == []


def test_a_served_version_kfed_does_not_serve_is_named_with_the_way_past_it() -> None:
    (problem,) = version_losses(UPSTREAM, KFED)

    assert problem.startswith("clusterqueues.kueue.x-k8s.io: the installed CRD serves v1beta1")
    assert "--allow-dropping-served-versions" in problem
    assert version_losses(UPSTREAM, KFED, allow_served=True) == []


def test_a_stored_version_is_never_given_up() -> None:
    older = crd(("v1beta1", True), ("v1beta2", True), stored=("v1beta1", "v1beta2"))

    problems = version_losses(older, KFED, allow_served=True)

    assert len(problems) == 1
    assert "stored as v1beta1" in problems[0] and "unreadable" in problems[0]
    assert len(version_losses(older, KFED)) == 1, "one sentence per lost version, not two"


def test_a_version_no_longer_served_by_the_installed_crd_is_not_a_loss() -> None:
    retired = crd(("v1beta1", False), ("v1beta2", True), stored=("v1beta2",))

    assert served(retired) == ["v1beta2"]
    assert version_losses(retired, KFED) == []
