"""charts/kfed's static templates, generated from deploy/ (one source for both).

Every file a kustomization of deploy/ lists (the manager's and the worker's base, their
components, deploy/roles) becomes a template of charts/kfed/templates/generated/: the same
objects with the chart's labels, ``{{ .Release.Namespace }}`` for ``kueue-system``, the
release's full name for ``kfed`` in every ``kfed-*`` name (but those the processes fix), inside
the ``if`` that says when the chart renders them (the side, a component's value). A few lines
take a value (VALUE_LINES) or are left out by one (OPTIONAL_ITEMS), and APIServices are
rendered only when no other owner's exists (KIND_CONDITIONS). A file added to one of those
kustomizations flows into the chart at the next ``make chart``; a new component is refused
until COMPONENTS says which value turns it on.

Not generated: the Namespaces (Helm's ``--create-namespace``; uninstalling never deletes a
namespace) and the two Deployments, whose fields the chart's values set
(templates/manager/deployment.yaml, templates/worker/deployment.yaml);
tests/integration/deploy/test_chart.py compares those with kustomize's output.

    python -m e2e.chartgen            # write the templates
    python -m e2e.chartgen --check    # exit 1 and name the files that are not current
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
GENERATED = REPO / "charts" / "kfed" / "templates" / "generated"
NAMESPACE = "kueue-system"
HAND_WRITTEN = {"deployment.yaml", "shim-deployment.yaml", "namespace.yaml", "servicemonitor.yaml"}
"""Files the chart templates by hand (Deployments; ServiceMonitors, which metrics-secure patches)
or leaves to Helm (Namespace)."""

SIDE_MANAGER = 'eq .Values.side "manager"'
SIDE_WORKER = 'eq .Values.side "worker"'


@dataclass(frozen=True, slots=True)
class Source:
    kustomization: str
    """A directory of deploy/ whose kustomization.yaml lists the files."""
    condition: str
    """When the chart renders its files: a Helm template condition."""


SECURE_METRICS = ".Values.observability.secureMetrics"
PROMETHEUS_OPERATOR = ".Values.observability.prometheusOperator"
METRICS_CERT_MANAGER = (
    f'{SECURE_METRICS} (eq .Values.observability.metricsCertificates "cert-manager")'
)

SOURCES = [
    Source("roles", ".Values.userRoles.enabled"),
    # A directory the metrics-secure components list (shared by both sides).
    Source("observability/metrics-access", SECURE_METRICS),
    Source("manager/base", SIDE_MANAGER),
    Source("worker/base", SIDE_WORKER),
]
COMPONENTS = {
    "manager/components/webhook-shared-secret": (
        f'and ({SIDE_MANAGER}) (eq .Values.webhook.certificates "kfed")'
    ),
    "manager/components/webhook-cert-manager": (
        f'and ({SIDE_MANAGER}) (eq .Values.webhook.certificates "cert-manager")'
    ),
    "worker/components/drills": f"and ({SIDE_WORKER}) .Values.worker.managerRemote.drills",
    "worker/components/logs": f"and ({SIDE_WORKER}) .Values.worker.managerRemote.logs",
    "manager/components/metrics-secure": f"and ({SIDE_MANAGER}) {SECURE_METRICS}",
    "worker/components/metrics-secure": f"and ({SIDE_WORKER}) {SECURE_METRICS}",
    "manager/components/metrics-cert-manager": f"and ({SIDE_MANAGER}) {METRICS_CERT_MANAGER}",
    "worker/components/metrics-cert-manager": f"and ({SIDE_WORKER}) {METRICS_CERT_MANAGER}",
    "manager/components/prometheus": f"and ({SIDE_MANAGER}) {PROMETHEUS_OPERATOR}",
    "worker/components/prometheus": f"and ({SIDE_WORKER}) {PROMETHEUS_OPERATOR}",
}
"""Every component of deploy/ and the value that turns it on in the chart."""

OPTIONAL_FILES = {
    "manager/base/networkpolicy.yaml": ".Values.networkPolicy.enabled",
    "worker/base/networkpolicy.yaml": ".Values.networkPolicy.enabled",
    "manager/base/visibility.yaml": ".Values.manager.visibility.enabled",
    "manager/base/poddisruptionbudget.yaml": ".Values.manager.podDisruptionBudget.enabled",
    "worker/base/poddisruptionbudget.yaml": ".Values.worker.podDisruptionBudget.enabled",
}
"""Files of deploy/ the chart can leave out, and the value that keeps them."""

OPTIONAL_ITEMS = {
    "manager/base/service.yaml": {"    - name: visibility": ".Values.manager.visibility.enabled"},
}
"""List items of deploy/'s files the chart leaves out unless a value holds: the item whose
first line is given, with every line indented deeper that follows it (by file, then line)."""

VALUE_LINES = {
    f"{side}/base/poddisruptionbudget.yaml": {
        # dig: a release upgraded with --reuse-values from a chart without the value keeps 1.
        "  minAvailable: 1": '  minAvailable: {{ dig "minAvailable" 1 .Values.'
        + side
        + ".podDisruptionBudget }}",
    }
    for side in ("manager", "worker")
}
"""Lines of deploy/'s files whose value the chart takes from its values (deploy/'s value is the
values' default): by file, the line and its template."""

KIND_CONDITIONS = {
    "APIService": 'include "kfed.rendersAPIService" (dict "root" $ "name" "{name}")',
}
"""Objects the chart renders only when a condition holds, by kind (``{name}``: the object's
name). APIServices: upstream Kueue creates the same ones, and an upstream release's must be
left as they are (charts/kfed/templates/_helpers.tpl)."""

FULLNAME = '{{ include "kfed.fullname" $ }}'
"""What stands for ``kfed`` in the names of the chart's objects: the release's full name
(``kfed`` for a release named kfed, the documented one; nameOverride, fullnameOverride)."""
KFED_NAME = re.compile(r"(?<![\w./-])kfed-([a-z0-9]+(?:-[a-z0-9]+)*)")
KEPT_NAMES = {
    "kfed-manager-leader": "the manager's leader Lease (manager/main.py)",
    "kfed-worker-shim-leader": "the shim's leader Lease (worker_shim/main.py)",
}
"""Names the processes fix, never the release's: kept as written wherever they appear."""
KEPT_LINES = {
    "manager/components/webhook-shared-secret/rbac.yaml": {
        # The webhook configuration the manager registers itself, under a fixed name
        # (manager/federation/webhooks/webhookconfig.py).
        '    resourceNames: ["kfed-manager"]',
    },
}
"""Lines of deploy/'s files whose kfed-* names the processes fix: kept as written."""

LABELS = '{{- include "kfed.labels" $ | nindent 4 }}'


class ChartGenError(ValueError):
    """deploy/ holds something the generator cannot carry into the chart; the message says
    what to do."""


def sources() -> list[Source]:
    """The base kustomizations, then every component directory found under deploy/ (each must
    be known to COMPONENTS)."""
    found = sorted(
        str(p.parent.relative_to(DEPLOY)) for p in DEPLOY.glob("*/components/*/kustomization.yaml")
    )
    unknown = [c for c in found if c not in COMPONENTS]
    if unknown:
        raise ChartGenError(
            f"deploy/ has components the chart does not know: {', '.join(unknown)}; add each "
            "to COMPONENTS in e2e/chartgen.py with the value that turns it on (and that value "
            "to charts/kfed/values.yaml)"
        )
    return [*SOURCES, *(Source(c, COMPONENTS[c]) for c in found)]


def listed_files(directory: Path) -> list[Path]:
    """The files (not directories) the kustomization lists under resources."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    files = []
    for entry in kustomization.get("resources") or []:
        path = directory / entry
        if path.is_file() and path.name not in HAND_WRITTEN:
            files.append(path)
    return files


def component_labels() -> dict[tuple[str, str], list[str]]:
    """The labels components add to objects of a base by a patch (``op: add`` on
    ``/metadata/labels/...``), as template lines under the component's condition, by the
    object's kind and name."""
    found: dict[tuple[str, str], list[str]] = {}
    for component, condition in COMPONENTS.items():
        path = DEPLOY / component / "kustomization.yaml"
        if not path.exists():
            continue
        for patch in yaml.safe_load(path.read_text()).get("patches") or []:
            target = patch.get("target") or {}
            ops = yaml.safe_load(patch.get("patch") or "[]")
            if not isinstance(ops, list) or "kind" not in target or "name" not in target:
                continue
            labels = {
                op["path"].removeprefix(LABEL_PATH).replace("~1", "/").replace("~0", "~"): op[
                    "value"
                ]
                for op in ops
                if op.get("op") == "add" and op.get("path", "").startswith(LABEL_PATH)
            }
            if labels:
                found.setdefault((target["kind"], target["name"]), []).extend(
                    [
                        f"    {{{{- if {condition} }}}}",
                        *(f"    {line}" for line in yaml.safe_dump(labels).splitlines()),
                        "    {{- end }}",
                    ]
                )
    return found


LABEL_PATH = "/metadata/labels/"


def with_labels(document: list[str], origin: str, extra: list[str] | None = None) -> list[str]:
    """``document``'s lines with the chart's labels (and ``extra`` label lines) merged into
    metadata.labels."""
    added = [f"    {LABELS}", *(extra or [])]
    try:
        start = document.index("metadata:")
    except ValueError:
        raise ChartGenError(f"{origin}: a document without a block `metadata:`") from None
    end = start + 1
    while end < len(document) and (document[end].startswith(" ") or not document[end]):
        end += 1
    for i in range(start + 1, end):
        if document[i].rstrip() == "  labels:":
            return [*document[: i + 1], *added, *document[i + 1 :]]
        if document[i].startswith("  labels:"):
            raise ChartGenError(f"{origin}: write metadata.labels as a block, one per line")
    return [*document[: start + 1], "  labels:", *added, *document[start + 1 :]]


def release_named(line: str) -> str:
    """``line`` with each ``kfed-*`` name but KEPT_NAMES made the release's (FULLNAME); comment
    lines as written."""
    if line.lstrip().startswith("#"):
        return line
    return KFED_NAME.sub(
        lambda m: m.group() if m.group() in KEPT_NAMES else f"{FULLNAME}-{m.group(1)}", line
    )


def with_optional_items(lines: list[str], items: dict[str, str], origin: str) -> list[str]:
    """``lines`` with each item of ``items`` (its first line: a condition) inside an ``if``."""
    out: list[str] = []
    found = set()
    i = 0
    while i < len(lines):
        condition = items.get(lines[i])
        if condition is None:
            out.append(lines[i])
            i += 1
            continue
        found.add(lines[i])
        indent = " " * (len(lines[i]) - len(lines[i].lstrip(" ")))
        end = i + 1
        while end < len(lines) and lines[end].startswith(indent + " ") and lines[end].strip():
            end += 1
        out += [f"{indent}{{{{- if {condition} }}}}", *lines[i:end], f"{indent}{{{{- end }}}}"]
        i = end
    missing = sorted(set(items) - found)
    if missing:
        raise ChartGenError(f"{origin}: no line {missing[0]!r} (OPTIONAL_ITEMS in e2e/chartgen.py)")
    return out


def with_value_lines(lines: list[str], values: dict[str, str], origin: str) -> list[str]:
    """``lines`` with each line of ``values`` replaced by its template."""
    missing = sorted(set(values) - set(lines))
    if missing:
        raise ChartGenError(f"{origin}: no line {missing[0]!r} (VALUE_LINES in e2e/chartgen.py)")
    return [values.get(line, line) for line in lines]


def template_of(path: Path, condition: str, *, origin: str | None = None) -> str:
    """``path``'s objects as a template rendered when ``condition`` holds."""
    text = path.read_text()
    origin = origin or str(path.relative_to(REPO))
    key = str(path.relative_to(DEPLOY)) if path.is_relative_to(DEPLOY) else origin
    # Prometheus's own templates (`{{ $labels.x }}` in a PrometheusRule) reach the output as
    # written: each delimiter becomes an action that prints it.
    text = re.sub(r"\{\{|\}\}", lambda m: f"{{{{`{m.group()}`}}}}", text)
    lines = [
        line.replace(NAMESPACE, "{{ .Release.Namespace }}")
        if not line.lstrip().startswith("#")
        else line
        for line in text.rstrip("\n").split("\n")
    ]
    lines = with_optional_items(lines, OPTIONAL_ITEMS.get(key, {}), origin)
    lines = with_value_lines(lines, VALUE_LINES.get(key, {}), origin)
    kept = KEPT_LINES.get(key, set())
    if kept - set(lines):
        raise ChartGenError(f"{origin}: no line {sorted(kept - set(lines))[0]!r} (KEPT_LINES)")
    documents: list[list[str]] = [[]]
    for line in lines:
        if line.rstrip() == "---":
            documents.append([])
        else:
            documents[-1].append(line)
    labels = component_labels()

    def identity(doc: list[str]) -> tuple[str, str]:
        # The lines deploy/ wrote, as YAML: template actions only where values go.
        text = "\n".join(line for line in doc if not line.lstrip().startswith("{{-"))
        obj = yaml.safe_load(
            re.sub(r"\{\{[^}]*\}\}", "x", text.replace("{{ .Release.Namespace }}", NAMESPACE))
        )
        return obj.get("kind", ""), obj.get("metadata", {}).get("name", "")

    def rendered_doc(doc: list[str]) -> list[str]:
        kind, name = identity(doc)
        out = [
            line if line in kept else release_named(line)
            for line in with_labels(doc, origin, labels.get((kind, name), []))
        ]
        if kind in KIND_CONDITIONS:
            out = [f"{{{{- if {KIND_CONDITIONS[kind].format(name=name)} }}}}", *out, "{{- end }}"]
        return out

    body = "\n---\n".join(
        "\n".join(rendered_doc(doc))
        for doc in documents
        if any(line and not line.lstrip().startswith("#") for line in doc)
    )
    optional = (
        OPTIONAL_FILES.get(str(path.relative_to(DEPLOY))) if path.is_relative_to(DEPLOY) else None
    )
    test = f"and ({condition}) {optional}" if optional else condition
    return (
        f"{{{{- /* Generated from {origin} by `python -m e2e.chartgen` (make chart): edit "
        "that file, not this one. */}}\n"
        f"{{{{- if {test} }}}}\n{body}\n{{{{- end }}}}\n"
    )


def rendered() -> dict[Path, str]:
    """Every generated template by its path."""
    templates: dict[Path, str] = {}
    for source in sources():
        directory = DEPLOY / source.kustomization
        prefix = source.kustomization.replace("/", "-").replace("-base", "")
        for path in listed_files(directory):
            name = f"{prefix}-{path.name}".replace("-components-", "-")
            templates[GENERATED / name] = template_of(path, source.condition)
    return templates


def stale() -> list[str]:
    """What differs between GENERATED and what deploy/ generates, one line each."""
    wanted = rendered()
    problems = [
        f"{p.relative_to(REPO)}: not current"
        for p, text in sorted(wanted.items())
        if not p.exists() or p.read_text() != text
    ]
    if GENERATED.exists():
        problems += [
            f"{p.relative_to(REPO)}: generated from nothing in deploy/ any more"
            for p in sorted(GENERATED.glob("*.yaml"))
            if p not in wanted
        ]
    return problems


def write() -> list[Path]:
    wanted = rendered()
    GENERATED.mkdir(parents=True, exist_ok=True)
    changed = []
    for path, text in sorted(wanted.items()):
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    for path in sorted(GENERATED.glob("*.yaml")):
        if path not in wanted:
            path.unlink()
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.chartgen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = stale()
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                print("run `make chart` to regenerate them from deploy/", file=sys.stderr)
                return 1
            print(f"{GENERATED.relative_to(REPO)}: up to date")
            return 0
        for path in write():
            print(f"{'wrote' if path.exists() else 'removed'} {path.relative_to(REPO)}")
    except ChartGenError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
