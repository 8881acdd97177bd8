"""charts/ as the tests see it: ``helm template`` and ``helm lint`` with Helm built by
e2e/binaries/build-helm.sh, and the objects compared the way test_chart.py compares them with
deploy/'s."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from e2e import binaries
from e2e.local import upstream_kueue
from tests.integration.deploy.manifests import REPO, Obj

CHART = REPO / "charts" / "kfed"
CRD_CHART = REPO / "charts" / "kfed-crds"
TESTBED_VALUES = CHART / "testbed"
NAMESPACE = "kueue-system"
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/part-of")
"""What the chart puts on every object besides deploy/'s labels (kustomize puts part-of on its
bases' objects only, not on its components')."""


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(binaries.helm_path()), *args], capture_output=True, text=True, timeout=120
    )
    if check:
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stderr}"
    return result


def template(*values: str, chart: Path = CHART) -> list[Obj]:
    """The chart's objects for these ``--set``/``-f`` arguments, in namespace kueue-system."""
    text = helm("template", "kfed", str(chart), "--namespace", NAMESPACE, *values).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def comparable(obj: Obj) -> Obj:
    """``obj`` without what differs by construction: the chart's own labels, and the order of a
    container's arguments (argparse reads them in any order)."""
    metadata = obj["metadata"]
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in HELM_ONLY_LABELS}
    if labels:
        metadata["labels"] = labels
    else:
        metadata.pop("labels", None)
    if obj["kind"] == "Deployment":
        for container in obj["spec"]["template"]["spec"]["containers"]:
            container["args"] = sorted(container["args"])
    return obj


def by_identity(objects: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): comparable(o)
        for o in objects
    }


UPSTREAM_RELEASE = "kueue"
"""The release name of upstream Kueue's chart in its own documentation and in these tests."""


def upstream_chart() -> Path:
    """Upstream Kueue's own chart, in the released module build-kueue.sh copies beside the
    binary (`make binaries`)."""
    chart = upstream_kueue.source() / "charts" / "kueue"
    assert (chart / "Chart.yaml").is_file(), f"no upstream chart at {chart}: run make binaries"
    return chart


def selects(selector: Obj, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions) matches ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def members(aggregated: Obj, roles: list[Obj]) -> list[Obj]:
    """The ClusterRoles of ``roles`` that aggregated ClusterRole ``aggregated`` gathers."""
    selectors = aggregated["aggregationRule"].get("clusterRoleSelectors") or []
    return [
        role
        for role in roles
        if role["kind"] == "ClusterRole"
        and role["metadata"]["name"] != aggregated["metadata"]["name"]
        and any(selects(s, role["metadata"].get("labels") or {}) for s in selectors)
    ]
