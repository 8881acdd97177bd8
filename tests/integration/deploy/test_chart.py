"""charts/kfed renders the objects of deploy/: ``helm template`` with the values that stand for
an overlay equals ``kubectl kustomize`` of that overlay, object by object (the static ones are
generated from deploy/ by e2e/chartgen.py, the Deployments are templated: this is what keeps
the two equal), apart from the Namespace (Helm's --create-namespace) and the chart's own
labels. ``helm lint`` passes; the values change what they say; a value kfed cannot run with
fails the render with its name. No cluster needed."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
import yaml

from manager import configfile
from manager import main as manager_main
from manager.api import crdgen
from manager.federation.webhooks import webhookconfig
from tests.integration.deploy.chart import (
    CHART,
    CRD_CHART,
    NAMESPACE,
    TESTBED_VALUES,
    UPSTREAM_RELEASE,
    by_identity,
    helm,
    members,
    template,
    upstream_chart,
)
from tests.integration.deploy.manifests import DEPLOY, Obj, container_args, find, render
from worker_shim import main as shim_main

pytestmark = pytest.mark.integration

REAL_NODE = ("-f", str(TESTBED_VALUES / "real-node-values.yaml"))
AS_OVERLAY: dict[str, tuple[str, ...]] = {
    "manager/overlays/default": (),
    "manager/overlays/cert-manager": ("--set", "webhook.certificates=cert-manager"),
    "manager/overlays/testbed": (*REAL_NODE, "-f", str(TESTBED_VALUES / "manager-values.yaml")),
    "worker/overlays/default": ("--set", "side=worker"),
    "worker/overlays/drills": ("--set", "side=worker", "--set", "worker.managerRemote.drills=true"),
    "worker/overlays/logs": ("--set", "side=worker", "--set", "worker.managerRemote.logs=true"),
    "worker/overlays/testbed": (*REAL_NODE, "-f", str(TESTBED_VALUES / "worker-values.yaml")),
    "manager/overlays/prometheus": (
        "--set",
        "observability.prometheusOperator=true",
        "--set",
        "observability.secureMetrics=true",
    ),
    "worker/overlays/prometheus": (
        "--set",
        "side=worker",
        "--set",
        "observability.prometheusOperator=true",
        "--set",
        "observability.secureMetrics=true",
    ),
    "manager/overlays/prometheus-cert-manager": (
        *("--set", "webhook.certificates=cert-manager"),
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
        *("--set", "observability.metricsCertificates=cert-manager"),
    ),
    "worker/overlays/prometheus-cert-manager": (
        *("--set", "side=worker"),
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
        *("--set", "observability.metricsCertificates=cert-manager"),
    ),
    # Without CRDs and Namespace, as the chart always is (kfed-crds and --create-namespace).
    "worker/overlays/fence-only": ("--set", "side=worker", "--set", "worker.mode=fence-only"),
}
"""Each overlay of deploy/ and the values that render the same objects."""
TRACING = {
    "manager/overlays/observability": ("--set", "observability.tracing.enabled=true"),
    "worker/overlays/observability": (
        "--set",
        "side=worker",
        "--set",
        "observability.tracing.enabled=true",
    ),
}
"""Overlays that add the observability stack (deploy/observability, not in the chart): only
the kfed Deployment is compared."""
NOT_IN_THE_CHART = {"Namespace"}
WITH_THE_BUDGETS = (
    *("--set", "manager.podDisruptionBudget.enabled=true"),
    *("--set", "worker.podDisruptionBudget.enabled=true"),
)
"""deploy/'s bases run two replicas of each side with a PodDisruptionBudget; the chart ships
the budgets off (as upstream Kueue's chart does): these values add them to every overlay's."""


@pytest.fixture(autouse=True)
def in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def difference(expected: Obj, actual: Obj) -> str:
    return "".join(
        difflib.unified_diff(
            yaml.safe_dump(expected).splitlines(keepends=True),
            yaml.safe_dump(actual).splitlines(keepends=True),
            "kubectl kustomize",
            "helm template",
        )
    )


@pytest.mark.parametrize("overlay", sorted(AS_OVERLAY))
def test_the_chart_renders_the_objects_of_each_overlay(overlay: str) -> None:
    kustomized = by_identity(
        [o for o in render(DEPLOY / overlay) if o["kind"] not in NOT_IN_THE_CHART]
    )
    charted = by_identity(template(*WITH_THE_BUDGETS, *AS_OVERLAY[overlay]))

    assert sorted(kustomized) == sorted(charted), (
        f"only in deploy/{overlay}: {sorted(set(kustomized) - set(charted))}; only in the "
        f"chart: {sorted(set(charted) - set(kustomized))} (`make chart` regenerates the "
        "static templates; Deployments: charts/kfed/templates/*/deployment.yaml)"
    )
    differing = [
        f"{identity}:\n{difference(kustomized[identity], charted[identity])}"
        for identity in sorted(kustomized)
        if kustomized[identity] != charted[identity]
    ]
    assert not differing, "\n".join(differing)


@pytest.mark.parametrize("overlay", sorted(TRACING))
def test_tracing_sets_the_deployment_of_the_observability_overlays(overlay: str) -> None:
    kustomized = by_identity([o for o in render(DEPLOY / overlay) if o["kind"] == "Deployment"])
    charted = by_identity([o for o in template(*TRACING[overlay]) if o["kind"] == "Deployment"])
    (identity,) = [i for i in charted if i[2].startswith("kfed-")]

    assert kustomized[identity] == charted[identity], difference(
        kustomized[identity], charted[identity]
    )


@pytest.mark.parametrize(
    "values",
    [(), ("--set", "side=worker"), ("--set", "webhook.certificates=cert-manager")],
    ids=["manager", "worker", "cert-manager"],
)
def test_helm_lint_passes(values: tuple[str, ...]) -> None:
    result = helm("lint", "--strict", str(CHART), *values)

    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_helm_lint_passes_on_the_crd_chart() -> None:
    assert "0 chart(s) failed" in helm("lint", "--strict", str(CRD_CHART)).stdout


def test_the_crd_chart_holds_kfed_s_crds_kept_on_uninstall() -> None:
    rendered = {o["metadata"]["name"]: o for o in template(chart=CRD_CHART)}
    generated = [yaml.safe_load(text) for text in crdgen.render_all().values()]

    assert sorted(rendered) == sorted(c["metadata"]["name"] for c in generated)
    for crd in generated:
        charted = rendered[crd["metadata"]["name"]]
        assert charted["metadata"].pop("annotations") == {"helm.sh/resource-policy": "keep"}
        charted["metadata"].pop("labels")
        assert charted == crd


def test_the_values_set_what_they_name() -> None:
    objects = template(
        "--set", "image.repository=registry.example.com/kfed",
        "--set", "image.tag=0.2.0",
        "--set", "manager.replicas=3",
        "--set", "manager.resources.limits.memory=2Gi",
        "--set", "manager.failoverPolicy=fast",
        "--set", "manager.dispatchMode=all-at-once",
        "--set", "manager.extraArgs={--fair-sharing,--log-format=json}",
    )  # fmt: skip
    deployment = find(objects, "Deployment", "kfed-manager")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = manager_main.parse_args(container_args(objects, "kfed-manager"))

    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example.com/kfed:0.2.0"
    assert container["resources"]["limits"]["memory"] == "2Gi"
    assert args.failover_policy.value == "fast"
    assert args.dispatch_mode.value.endswith("-all-at-once")
    assert args.fair_sharing is True and args.log_format == "json"


def test_the_worker_mode_and_its_extra_args_reach_the_shim() -> None:
    objects = template(
        "--set", "side=worker", "--set", "worker.mode=no-fencing",
        "--set", "worker.extraArgs={--workers=8}",
    )  # fmt: skip
    args = shim_main.parse_args(container_args(objects, "kfed-worker-shim"))

    assert args.no_fencing is True and args.workers == 8
    assert not [o for o in objects if o["metadata"]["name"].startswith("kfed-manager-webhook")]


def test_the_worker_shim_runs_two_leader_electing_replicas_or_fences_only() -> None:
    default = template("--set", "side=worker")
    fence_only = template("--set", "side=worker", "--set", "worker.mode=fence-only")
    args = shim_main.parse_args(container_args(default, "kfed-worker-shim"))

    assert find(default, "Deployment", "kfed-worker-shim")["spec"]["replicas"] == 2
    assert args.leader_elect is True and args.mode.value == "admit"
    assert (
        shim_main.parse_args(container_args(fence_only, "kfed-worker-shim")).mode.value
        == "fence-only"
    )
    with_pdb = template("--set", "side=worker", "--set", "worker.podDisruptionBudget.enabled=true")
    assert find(with_pdb, "PodDisruptionBudget", "kfed-worker-shim")["spec"]["minAvailable"] == 1


def test_secure_metrics_without_prometheus_operator_objects() -> None:
    objects = template("--set", "observability.secureMetrics=true")
    args = manager_main.parse_args(container_args(objects, "kfed-manager"))

    assert args.metrics_secure is True
    assert not [o for o in objects if o["kind"] in {"ServiceMonitor", "PrometheusRule"}]
    assert find(objects, "ClusterRoleBinding", "kfed-manager-metrics-auth")


def test_manager_config_writes_the_file_the_manager_reads(tmp_path: Path) -> None:
    objects = template(
        "--set", "manager.managerConfig.multiKueue.gcInterval=2m",
        "--set", "manager.managerConfig.kfed.admissionTimeout=45s",
    )  # fmt: skip
    config = find(objects, "ConfigMap", "kfed-manager-config")
    pod = find(objects, "Deployment", "kfed-manager")["spec"]["template"]["spec"]
    args = container_args(objects, "kfed-manager")
    (flag,) = [a for a in args if a.startswith("--config=")]
    path = Path(flag.removeprefix("--config="))
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "config"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "config"]

    assert path.parent == Path(mount["mountPath"])
    assert volume["configMap"]["name"] == "kfed-manager-config"
    text = config["data"][path.name]
    assert yaml.safe_load(text)["namespace"] == "kueue-system"
    local = tmp_path / path.name
    local.write_text(text)
    parsed = manager_main.parse_args(
        [a for a in args if not a.startswith("--config=")] + [f"--config={local}"]
    )
    assert parsed.gc_interval == 120.0 and parsed.admission_timeout == 45.0
    assert configfile.API_VERSIONS[-1] == yaml.safe_load(text)["apiVersion"]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("side=workers", "side"),
        ("worker.mode=fence", "worker.mode"),
        ("manager.failoverPolicy=twice", "manager.failoverPolicy"),
        ("manager.dispatchMode=random", "manager.dispatchMode"),
        ("webhook.certificates=vault", "webhook.certificates"),
        ("observability.metricsCertificates=vault", "observability.metricsCertificates"),
        ("observability.metricsCertificates=cert-manager", "observability.secureMetrics=true"),
        ("manager.visibility.apiServices=maybe", "manager.visibility.apiServices"),
    ],
)
def test_a_value_kfed_cannot_run_with_fails_the_render_by_name(value: str, named: str) -> None:
    result = helm("template", "kfed", str(CHART), "--set", value, check=False)

    assert result.returncode != 0
    assert named in result.stderr, result.stderr


def test_every_overlay_of_deploy_has_the_values_that_render_it() -> None:
    overlays = {
        str(p.parent.relative_to(DEPLOY)) for p in DEPLOY.glob("*/overlays/*/kustomization.yaml")
    }

    assert overlays == set(AS_OVERLAY) | set(TRACING), (
        "add the values that stand for each new overlay to AS_OVERLAY (or TRACING)"
    )


def test_a_changed_manager_config_rolls_the_pods() -> None:
    def annotations(*values: str) -> dict[str, str]:
        objects = template(*values)
        template_meta = find(objects, "Deployment", "kfed-manager")["spec"]["template"]
        found: dict[str, str] = template_meta["metadata"].get("annotations", {})
        return found

    one = annotations("--set", "manager.managerConfig.kfed.admissionTimeout=30s")
    other = annotations("--set", "manager.managerConfig.kfed.admissionTimeout=45s")
    bare = annotations(
        "--set", "manager.managerConfig.kfed.admissionTimeout=30s",
        "--set", "observability.prometheusAnnotations=false",
    )  # fmt: skip

    assert one["kfed.io/config-checksum"] != other["kfed.io/config-checksum"]
    assert bare == {"kfed.io/config-checksum": one["kfed.io/config-checksum"]}
    assert "kfed.io/config-checksum" not in annotations()


@pytest.mark.parametrize("side", ["manager", "worker"])
def test_another_release_namespace_reaches_every_object_and_flag(side: str) -> None:
    text = helm(
        "template", "kfed", str(CHART), "--namespace", "kfed-system", "--set", f"side={side}",
        "--set", "webhook.certificates=cert-manager",
    ).stdout  # fmt: skip
    objects = [o for o in yaml.safe_load_all(text) if o]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    parse = manager_main.parse_args if side == "manager" else shim_main.parse_args
    args = parse(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in lines if "kueue-system" in line]
    assert args.namespace == "kfed-system"
    namespaces = {o["metadata"].get("namespace") for o in objects} - {None}
    assert namespaces <= {"kfed-system", "kube-system"}, "kube-system: the visibility reader"
    subjects = [s for o in objects for s in o.get("subjects", []) if s["kind"] == "ServiceAccount"]
    assert subjects and {s["namespace"] for s in subjects} == {"kfed-system"}


@pytest.mark.parametrize(
    ("side", "deployment"), [("manager", "kfed-manager"), ("worker", "kfed-worker-shim")]
)
def test_a_metrics_certificate_from_cert_manager_is_served_and_verified(
    side: str, deployment: str
) -> None:
    objects = template(
        *("--namespace", "kfed-system", "--set", f"side={side}"),
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
        *("--set", "observability.metricsCertificates=cert-manager"),
    )
    service = find(objects, "Service", deployment)["metadata"]
    certificate = find(objects, "Certificate", f"{deployment}-metrics")["spec"]
    issuer = find(objects, "Issuer", certificate["issuerRef"]["name"])
    pod = find(objects, "Deployment", deployment)["spec"]["template"]["spec"]
    (flag,) = [a for a in container_args(objects, deployment) if a.startswith("--metrics-cert")]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "metrics-certs"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "metrics-certs"]
    (endpoint,) = find(objects, "ServiceMonitor", deployment)["spec"]["endpoints"]

    assert "--metrics-secure" in container_args(objects, deployment)
    assert flag == f"--metrics-cert-dir={mount['mountPath']}"
    assert volume["secret"]["secretName"] == certificate["secretName"]
    assert f"{service['name']}.{service['namespace']}.svc" in certificate["dnsNames"]
    assert "server auth" in certificate["usages"]
    assert issuer["metadata"]["namespace"] == service["namespace"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "serverName": f"{service['name']}.{service['namespace']}.svc",
        "ca": {"secret": {"name": certificate["secretName"], "key": "ca.crt"}},
    }


def test_without_cert_manager_the_metrics_certificate_is_the_process_own() -> None:
    objects = template(
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
    )
    (endpoint,) = find(objects, "ServiceMonitor", "kfed-manager")["spec"]["endpoints"]

    assert not [o for o in objects if o["kind"] in ("Certificate", "Issuer")]
    assert not [a for a in container_args(objects, "kfed-manager") if "cert-dir" in a]
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


DEPLOYMENTS = {"manager": "kfed-manager", "worker": "kfed-worker-shim"}


def pod_labels(objects: list[Obj], deployment: str) -> dict[str, str]:
    labels: dict[str, str] = find(objects, "Deployment", deployment)["spec"]["template"][
        "metadata"
    ]["labels"]
    return labels


@pytest.mark.parametrize("side", sorted(DEPLOYMENTS))
def test_the_pod_disruption_budget_is_off_by_default_as_upstream_ships_it(side: str) -> None:
    objects = template("--set", f"side={side}", "--set", f"{side}.replicas=1")

    assert not [o for o in objects if o["kind"] == "PodDisruptionBudget"]


@pytest.mark.parametrize("side", sorted(DEPLOYMENTS))
@pytest.mark.parametrize("min_available", [2, "50%"])
def test_the_pod_disruption_budget_keeps_the_min_available_of_its_value(
    side: str, min_available: int | str
) -> None:
    objects = template(
        "--set", f"side={side}", "--set", f"{side}.podDisruptionBudget.enabled=true",
        "--set", f"{side}.podDisruptionBudget.minAvailable={min_available}",
    )  # fmt: skip
    (budget,) = [o for o in objects if o["kind"] == "PodDisruptionBudget"]

    assert budget["spec"]["minAvailable"] == min_available
    selector = budget["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels(objects, DEPLOYMENTS[side]).items()


def test_the_service_drops_the_visibility_port_with_the_visibility_api() -> None:
    on = template()
    off = template("--set", "manager.visibility.enabled=false")

    def ports(objects: list[Obj]) -> dict[str, int]:
        service = find(objects, "Service", "kfed-manager")["spec"]
        return {p["name"]: p["port"] for p in service["ports"]}

    assert ports(on) == {"webhook": 443, "metrics": 8080, "visibility": 8082}
    assert ports(off) == {"webhook": 443, "metrics": 8080}
    container = find(off, "Deployment", "kfed-manager")["spec"]["template"]["spec"]["containers"][0]
    assert set(ports(off)) == {p["name"] for p in container["ports"]}
    assert "--visibility-port=0" in container_args(off, "kfed-manager")
    assert not [o for o in off if o["kind"] == "APIService"]


def test_the_apiservices_follow_their_value_outside_a_cluster() -> None:
    """Outside a cluster (helm template) ``auto`` finds no APIService of another owner: both
    are rendered, for the manager's Service, as with ``true``; ``false`` renders none.
    tests/integration/deploy/test_chart_beside_upstream_kueue.py installs beside upstream's."""
    for value, rendered in [("auto", 2), ("true", 2), ("false", 0)]:
        objects = template("--set", f"manager.visibility.apiServices={value}")
        found = [o for o in objects if o["kind"] == "APIService"]

        assert len(found) == rendered, value
        assert all(o["spec"]["service"]["name"] == "kfed-manager" for o in found)


EVERY_OBJECT = {
    "manager": (
        *("--set", "side=manager", "--set", "manager.podDisruptionBudget.enabled=true"),
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
        *("--set", "manager.managerConfig.multiKueue.origin=team-a"),
    ),
    "manager-cert-manager": (
        *("--set", "side=manager", "--set", "webhook.certificates=cert-manager"),
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
        *("--set", "observability.metricsCertificates=cert-manager"),
    ),
    "worker": (
        *("--set", "side=worker", "--set", "worker.podDisruptionBudget.enabled=true"),
        *("--set", "worker.managerRemote.drills=true", "--set", "worker.managerRemote.logs=true"),
        *("--set", "observability.prometheusOperator=true"),
        *("--set", "observability.secureMetrics=true"),
        *("--set", "observability.metricsCertificates=cert-manager"),
    ),
}
"""Values under which each side renders every object it can."""
KEPT_NAMES = {"kfed-manager-leader", "kfed-worker-shim-leader"}
"""kfed-* names the processes fix (their leader Leases), named only in descriptions."""
BUILT_IN_ROLES = {"extension-apiserver-authentication-reader"}


@pytest.mark.parametrize("values", sorted(EVERY_OBJECT))
@pytest.mark.parametrize(
    ("release", "names", "full"),
    [
        ("kfed", ("--set", "fullnameOverride=team-a-fed"), "team-a-fed"),
        ("team-a", (), "team-a-kfed"),
        ("kfed-prod", (), "kfed-prod"),
        ("kfed", ("--set", "nameOverride=batch"), "kfed-batch"),
    ],
    ids=["fullnameOverride", "release", "release-with-kfed", "nameOverride"],
)
def test_object_names_follow_the_release_s_full_name_and_still_meet(
    values: str, release: str, names: tuple[str, ...], full: str
) -> None:
    text = helm(
        "template", release, str(CHART), "--namespace", NAMESPACE, *EVERY_OBJECT[values], *names
    ).stdout
    objects = [o for o in yaml.safe_load_all(text) if o]
    by_kind: dict[str, set[str]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], set()).add(obj["metadata"]["name"])

    # Every object is named after the release (APIServices after their API), and no line
    # names a kfed-* object of another full name, but for the names the processes fix.
    assert not [
        (o["kind"], o["metadata"]["name"])
        for o in objects
        if o["kind"] != "APIService" and not o["metadata"]["name"].startswith(f"{full}-")
    ]
    stray = {
        token
        for line in text.splitlines()
        if not line.lstrip().startswith(("#", "helm.sh/chart:"))
        for token in re.findall(r"(?<![\w./-])kfed-[a-z0-9-]*[a-z0-9]", line)
        if not token.startswith(f"{full}-") and token not in {full, *KEPT_NAMES}
    }
    allowed = {webhookconfig.DEFAULT_CONFIGURATION_NAME} if values == "manager" else set()
    assert stray <= allowed, "the manager registers its webhook configuration by a fixed name"
    if values == "manager":
        (registration,) = [
            o
            for o in objects
            if o["metadata"]["name"] == f"{full}-manager-webhook-registration"
            and o["kind"] == "ClusterRole"
        ]
        assert registration["rules"][1]["resourceNames"] == [
            webhookconfig.DEFAULT_CONFIGURATION_NAME
        ]

    # ... and they still find each other.
    side = "worker" if values == "worker" else "manager"
    deployment = f"{full}-{DEPLOYMENTS[side].removeprefix('kfed-')}"
    pod = find(objects, "Deployment", deployment)["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] in by_kind["ServiceAccount"]
    for obj in objects:
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj["roleRef"]
            assert ref["name"] in by_kind.get(ref["kind"], set()) | BUILT_IN_ROLES, ref
            for subject in obj["subjects"]:
                if subject.get("namespace") == NAMESPACE:
                    assert subject["name"] in by_kind["ServiceAccount"], subject
        selector = {
            "Service": spec.get("selector"),
            "PodDisruptionBudget": (spec.get("selector") or {}).get("matchLabels"),
            "NetworkPolicy": (spec.get("podSelector") or {}).get("matchLabels"),
        }.get(kind)
        if selector:
            assert selector.items() <= pod["metadata"]["labels"].items(), (kind, selector)
        if kind == "APIService":
            assert spec["service"]["name"] in by_kind["Service"]
        if kind == "ServiceMonitor":
            labels = [o["metadata"]["labels"] for o in objects if o["kind"] == "Service"]
            wanted = spec["selector"]["matchLabels"].items()
            assert any(wanted <= service.items() for service in labels)
        if kind == "Certificate" and "issuerRef" in spec:
            assert spec["issuerRef"]["name"] in by_kind["Issuer"] | by_kind.get(
                "ClusterIssuer", set()
            )
    args = container_args(objects, deployment)
    for flag in [a for a in args if a.startswith("--webhook-service=")]:
        assert flag.partition("=")[2] in by_kind["Service"]
    for flag in [a for a in args if a.startswith("--webhook-cert-secret=")]:
        secret = flag.partition("=")[2]
        assert any(
            secret in (rule.get("resourceNames") or [])
            for o in objects
            if o["kind"] == "Role"
            for rule in o["rules"]
        )
    for volume in pod["spec"].get("volumes") or []:
        if "configMap" in volume:
            assert volume["configMap"]["name"] in by_kind["ConfigMap"]


def upstream_cluster_roles() -> list[Obj]:
    text = helm(
        "template", UPSTREAM_RELEASE, str(upstream_chart()), "--namespace", NAMESPACE
    ).stdout
    return [o for o in yaml.safe_load_all(text) if o and o["kind"] == "ClusterRole"]


@pytest.mark.parametrize("side", sorted(DEPLOYMENTS))
def test_no_role_of_the_chart_is_gathered_into_upstream_kueue_s_roles(side: str) -> None:
    upstream = upstream_cluster_roles()
    aggregated = {r["metadata"]["name"]: r for r in upstream if r.get("aggregationRule")}
    ours = [o for o in template("--set", f"side={side}") if o["kind"] == "ClusterRole"]
    ours_aggregated = [r for r in ours if r.get("aggregationRule")]

    # Upstream v0.17.0 gathers its roles for people by rbac.kueue.x-k8s.io/batch-admin and
    # batch-user into these two.
    assert set(aggregated) == {"kueue-batch-admin-role", "kueue-batch-user-role"}
    gathered = {
        name: sorted(m["metadata"]["name"] for m in members(role, ours))
        for name, role in aggregated.items()
    }
    assert gathered == {name: [] for name in aggregated}, "kfed's roles widen upstream's"
    # kfed's own aggregated roles gather kfed's roles only, never upstream's.
    assert {r["metadata"]["name"] for r in ours_aggregated} == {
        "kfed-batch-admin-role",
        "kfed-batch-user-role",
    }
    for role in ours_aggregated:
        assert not members(role, upstream), role["metadata"]["name"]
        assert members(role, ours), role["metadata"]["name"]
