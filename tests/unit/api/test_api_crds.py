"""The committed CRDs are exactly what the generator produces, and are structural."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from manager.api import crdgen
from manager.api.kinds import KUEUE_KINDS
from manager.cli.main import main

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "crds"


def test_committed_crds_match_the_models() -> None:
    """Fails when a model changed without `kfed crds --out-dir crds` being run."""
    problems = crdgen.check_dir(CRDS)
    assert not problems, "\n".join([*problems, "regenerate with: kfed crds --out-dir crds"])


def test_generation_is_deterministic() -> None:
    assert crdgen.render_all() == crdgen.render_all()


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("kind", KUEUE_KINDS, ids=lambda k: k.__name__)
def test_schemas_are_structural(kind: type[Any]) -> None:
    schema = crdgen.openapi_schema(kind)
    for path, node in _nodes(schema):
        for keyword in ("$ref", "anyOf", "allOf", "oneOf", "not", "nullable", "title"):
            assert keyword not in node, f"{path}: {keyword}"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node and "pattern" in node, path
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "boolean"}, path
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            item = node["items"]
            for key in keys:
                assert key in item.get("required", []) or "default" in item["properties"][key]


@pytest.mark.parametrize("kind", KUEUE_KINDS, ids=lambda k: k.__name__)
def test_only_v1beta2_is_served(kind: type[Any]) -> None:
    versions = crdgen.crd(kind)["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [("v1beta2", True, True)]


def test_names_scopes_and_columns_are_kueue_like() -> None:
    by_kind = {k.resource.kind: crdgen.crd(k)["spec"] for k in KUEUE_KINDS}
    short = {kind: spec["names"].get("shortNames", []) for kind, spec in by_kind.items()}
    for kind, name in [
        ("ClusterQueue", "cq"),
        ("LocalQueue", "lq"),
        ("Workload", "wl"),
        ("ResourceFlavor", "rf"),
        ("WorkloadPriorityClass", "wpc"),
        ("AdmissionCheck", "ac"),
        ("MultiKueueCluster", "mkc"),
        ("MultiKueueConfig", "mkconf"),
        ("Cohort", "co"),
        # upstream's since v0.18 (kubebuilder markers of topology_types.go and
        # provisioningrequestconfig_types.go at v0.19.2; not in the reference copy of CRDs)
        ("Topology", "topo"),
        ("ProvisioningRequestConfig", "prc"),
    ]:
        assert name in short[kind]
    namespaced = {kind for kind, spec in by_kind.items() if spec["scope"] == "Namespaced"}
    assert namespaced == {"LocalQueue", "Workload"}
    columns = {
        kind: [c["name"] for c in spec["versions"][0].get("additionalPrinterColumns", [])]
        for kind, spec in by_kind.items()
    }
    assert columns["Workload"] == ["Queue", "Reserved in", "Admitted", "Finished", "Age"]
    assert columns["ClusterQueue"][:4] == [
        "Cohort",
        "Strategy",
        "Pending Workloads",
        "Admitted Workloads",
    ]
    assert columns["LocalQueue"][:3] == ["ClusterQueue", "Pending Workloads", "Admitted Workloads"]
    assert columns["MultiKueueCluster"][0] == "Connected"
    with_status = {k for k, s in by_kind.items() if "subresources" in s["versions"][0]}
    assert with_status == {
        "AdmissionCheck",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "MultiKueueCluster",
        "Workload",
    }


def test_workloads_are_selectable_by_their_cluster_queue() -> None:
    """Upstream's one selectable field (v0.18 on): ``kubectl get workloads --field-selector
    status.admission.clusterQueue=CQ``. No other kind declares any."""
    selectable = {
        k.resource.kind: fields
        for k in KUEUE_KINDS
        if (fields := crdgen.crd(k)["spec"]["versions"][0].get("selectableFields"))
    }
    assert selectable == {"Workload": [{"jsonPath": ".status.admission.clusterQueue"}]}


def test_cli_writes_then_checks(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "crds"
    written = runner.invoke(main, ["crds", "--output", str(out)])
    assert written.exit_code == 0, written.output
    assert sorted(p.name for p in out.iterdir()) == sorted(crdgen.render_all())
    assert runner.invoke(main, ["crds", "--output", str(out), "--check"]).exit_code == 0

    (out / "kueue.x-k8s.io_clusterqueues.yaml").write_text("# edited by hand\n")
    (out / "kueue.x-k8s.io_retired.yaml").write_text("# no longer generated\n")
    (out / "kueue.x-k8s.io_workloads.yaml").unlink()
    checked = runner.invoke(main, ["crds", "--output", str(out), "--check"])
    assert checked.exit_code == 1
    assert "clusterqueues.yaml: differs" in checked.output
    assert "workloads.yaml: missing" in checked.output
    assert "retired.yaml: no longer generated" in checked.output

    assert runner.invoke(main, ["crds", "--output", str(out)]).exit_code == 0
    assert runner.invoke(main, ["crds", "--output", str(out), "--check"]).exit_code == 0


def test_crd_files_are_plain_yaml() -> None:
    for path in sorted(CRDS.glob("*.yaml")):
        text = path.read_text()
        assert text.startswith(crdgen.HEADER)
        assert "&id" not in text and "*id" not in text, f"{path.name}: YAML anchors"
        assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"
