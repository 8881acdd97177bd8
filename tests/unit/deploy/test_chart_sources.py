"""charts/ files that must stay equal to their source, read without a cluster: charts/kfed's
static templates to deploy/ (e2e/chartgen.py), charts/kfed-crds' files to the CRDs generated
from manager/api; and the generator refuses what it cannot carry into the chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import chartgen
from manager.api import crdgen

REPO = Path(__file__).resolve().parents[3]


def test_the_chart_s_static_templates_are_generated_from_deploy() -> None:
    problems = chartgen.stale()

    assert not problems, "\n".join([*problems, "regenerate: make chart"])


def test_the_crd_chart_holds_the_generated_crds() -> None:
    problems = crdgen.check_dir(REPO / "charts" / "kfed-crds" / "files")

    assert not problems, "\n".join([*problems, "regenerate: make crds"])


def test_every_component_of_deploy_is_known_to_the_chart() -> None:
    components = [s.kustomization for s in chartgen.sources() if "/components/" in s.kustomization]

    assert sorted(components) == sorted(chartgen.COMPONENTS)


def test_labels_join_the_ones_an_object_has_or_come_first() -> None:
    labelled = ["kind: ClusterRole", "metadata:", "  name: x", "  labels:", "    a: 'true'"]
    bare = ["kind: Role", "metadata:", "  name: y", "rules: []"]

    assert chartgen.with_labels(labelled, "f")[4] == f"    {chartgen.LABELS}"
    assert chartgen.with_labels(bare, "f")[2:4] == ["  labels:", f"    {chartgen.LABELS}"]


def test_a_template_keeps_comments_and_takes_the_release_namespace(tmp_path: Path) -> None:
    source = tmp_path / "serviceaccount.yaml"
    source.write_text(
        "# in kueue-system\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n"
        "  name: a\n  namespace: kueue-system\n"
    )
    text = chartgen.template_of(source, chartgen.SIDE_MANAGER, origin="x")

    assert "# in kueue-system" in text
    assert "  namespace: {{ .Release.Namespace }}" in text
    assert '{{- if eq .Values.side "manager" }}' in text


def test_an_optional_file_of_deploy_is_rendered_when_its_value_says() -> None:
    policy = chartgen.DEPLOY / "worker" / "base" / "networkpolicy.yaml"

    text = chartgen.template_of(policy, chartgen.SIDE_WORKER)

    assert '{{- if and (eq .Values.side "worker") .Values.networkPolicy.enabled }}' in text


def test_flow_style_labels_are_refused(tmp_path: Path) -> None:
    flow = tmp_path / "a.yaml"
    flow.write_text("kind: Role\nmetadata:\n  name: a\n  labels: {a: b}\n")

    with pytest.raises(chartgen.ChartGenError, match="as a block"):
        chartgen.template_of(flow, "true", origin="a.yaml")


def test_template_braces_are_printed_as_written(tmp_path: Path) -> None:
    # A PrometheusRule's `{{ $labels.x }}`: tests/integration/deploy/test_chart.py checks
    # that Helm renders it unchanged (overlays/prometheus).
    braces = tmp_path / "b.yaml"
    braces.write_text("kind: Role\nmetadata:\n  name: '{{ x }}'\n")

    text = chartgen.template_of(braces, "true", origin="b.yaml")

    assert "name: '{{`{{`}} x {{`}}`}}'" in text


def test_labels_a_component_patches_in_follow_its_value() -> None:
    text = chartgen.rendered()[chartgen.GENERATED / "manager-service.yaml"]

    assert (
        '    {{- if and (eq .Values.side "manager") .Values.observability.prometheusOperator }}\n'
        "    app.kubernetes.io/name: kfed-manager\n"
        "    {{- end }}\n"
    ) in text
