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
        f"    app.kubernetes.io/name: {chartgen.FULLNAME}-manager\n"
        "    {{- end }}\n"
    ) in text


def test_kfed_names_become_the_release_s_but_those_the_processes_fix() -> None:
    line = '  resourceNames: ["kfed-manager-webhook-cert", "kfed-manager-leader"]'

    assert chartgen.release_named(line) == (
        f'  resourceNames: ["{chartgen.FULLNAME}-manager-webhook-cert", "kfed-manager-leader"]'
    )
    assert chartgen.release_named("# kfed-manager in a comment") == "# kfed-manager in a comment"
    assert chartgen.release_named("    kfed.io/metrics-access: 'true'") == (
        "    kfed.io/metrics-access: 'true'"
    )
    assert chartgen.release_named("    - kfed-manager.{{ .Release.Namespace }}.svc") == (
        f"    - {chartgen.FULLNAME}-manager.{{{{ .Release.Namespace }}}}.svc"
    )


def test_the_webhook_configuration_the_manager_registers_keeps_its_name() -> None:
    text = chartgen.rendered()[chartgen.GENERATED / "manager-webhook-shared-secret-rbac.yaml"]

    assert '    resourceNames: ["kfed-manager"]\n' in text
    assert f'    resourceNames: ["{chartgen.FULLNAME}-manager-webhook-cert"]\n' in text


def test_an_optional_item_is_left_out_unless_its_value_holds() -> None:
    lines = ["  ports:", "    - name: a", "      port: 1", "    - name: b", "      port: 2", "x: 1"]

    assert chartgen.with_optional_items(lines, {"    - name: b": ".Values.b"}, "f") == [
        "  ports:",
        "    - name: a",
        "      port: 1",
        "    {{- if .Values.b }}",
        "    - name: b",
        "      port: 2",
        "    {{- end }}",
        "x: 1",
    ]
    with pytest.raises(chartgen.ChartGenError, match="OPTIONAL_ITEMS"):
        chartgen.with_optional_items(lines, {"    - name: c": ".Values.c"}, "f")


def test_the_budgets_and_the_service_take_their_values() -> None:
    rendered = chartgen.rendered()
    service = rendered[chartgen.GENERATED / "manager-service.yaml"]

    for side in ("manager", "worker"):
        budget = rendered[chartgen.GENERATED / f"{side}-poddisruptionbudget.yaml"]
        line = (
            f'  minAvailable: {{{{ dig "minAvailable" 1 .Values.{side}.podDisruptionBudget }}}}\n'
        )
        assert line in budget
    assert "    {{- if .Values.manager.visibility.enabled }}\n    - name: visibility\n" in service
    with pytest.raises(chartgen.ChartGenError, match="VALUE_LINES"):
        chartgen.with_value_lines(["a: 2"], {"a: 1": "a: {{ .Values.a }}"}, "f")


def test_apiservices_are_rendered_only_when_no_other_owner_s_exists() -> None:
    text = chartgen.rendered()[chartgen.GENERATED / "manager-visibility.yaml"]

    for version in ("v1beta1", "v1beta2"):
        assert (
            '{{- if include "kfed.rendersAPIService" (dict "root" $ "name" '
            f'"{version}.visibility.kueue.x-k8s.io") }}}}\n'
        ) in text
    assert text.count("{{- end }}") == 3, "the two APIServices' and the file's"


def test_no_role_for_people_carries_upstream_kueue_s_aggregation_labels() -> None:
    text = (chartgen.DEPLOY / "roles" / "user-roles.yaml").read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))

    assert "rbac.kueue.x-k8s.io/" not in code
    assert "rbac.kfed.io/batch-admin: 'true'" in code
