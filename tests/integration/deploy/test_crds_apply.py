"""Installing kfed's CRDs where they already are (the lite clusters, ``crds/`` applied):
``kfed crds --check-cluster`` finds nothing lost, ``kfed crds --apply`` applies every CRD again
(server-side, the field manager the test bed uses: no conflict) and changes no served
version, and ``helm install --dry-run=server --take-ownership`` of charts/kfed-crds (the CRDs
were applied without Helm) renders past its own check (lookup reads the installed CRDs).
The refusals: tests/integration/interop/test_crds_beside_upstream_kueue.py, against upstream
Kueue's CRDs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import binaries
from e2e.local.federation import LocalFederation
from manager.api import crdgen
from manager.api.kinds import KUEUE_KINDS
from tests.integration.deploy.chart import CRD_CHART

pytestmark = pytest.mark.integration

KFED = str(Path(sys.executable).with_name("kfed"))


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def served_versions(fed: LocalFederation) -> dict[str, list[str]]:
    crds = json.loads(fed.kubectl("manager", "get", "crd", "-o", "json").stdout)["items"]
    return {
        c["metadata"]["name"]: [v["name"] for v in c["spec"]["versions"] if v["served"]]
        for c in crds
        if c["spec"]["group"] == "kueue.x-k8s.io"
    }


def test_kfed_crds_apply_over_kfed_s_own_crds_loses_nothing(kueue_crds: LocalFederation) -> None:
    kubeconfig = str(kueue_crds.kubeconfig("manager"))
    before = served_versions(kueue_crds)

    checked = run(KFED, "crds", "--check-cluster", "--kubeconfig", kubeconfig)
    applied = run(KFED, "crds", "--apply", "--kubeconfig", kubeconfig)

    assert checked.returncode == 0, checked.stderr
    assert f"{len(KUEUE_KINDS)} CRDs: none would lose" in checked.stdout
    assert applied.returncode == 0, applied.stderr
    names = {crdgen.crd(kind)["metadata"]["name"] for kind in KUEUE_KINDS}
    assert {line.removeprefix("applied ") for line in applied.stdout.splitlines()} == names
    assert served_versions(kueue_crds) == before


def test_bad_combinations_of_kfed_crds_options_are_usage_errors() -> None:
    both = run(KFED, "crds", "--check", "--apply")
    out_dir = run(KFED, "crds", "--apply", "--out-dir", "somewhere")

    assert both.returncode == 2 and "exclude each other" in both.stderr
    assert out_dir.returncode == 2 and "--out-dir" in out_dir.stderr


def test_the_crd_chart_passes_its_check_over_kfed_s_own_crds(kueue_crds: LocalFederation) -> None:
    result = run(
        str(binaries.helm_path()), f"--kubeconfig={kueue_crds.kubeconfig('manager')}",
        "install", "kfed-crds", str(CRD_CHART), "--dry-run=server", "--take-ownership",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("kind: CustomResourceDefinition") == len(KUEUE_KINDS)
