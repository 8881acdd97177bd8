"""Upstream's external frameworks (``jobkinds/external.py``): the configuration's two lists
checked as upstream checks them, with clear errors; the generic adapter's copy for the worker
and status back; and a run of such a kind finished from its copy's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import main as manager_main
from manager.api.externalframeworks import GroupVersionKind, check, names_flag, parse_gvk
from manager.controllers.jobkinds.external import ExternalKind, built_in, resource_from
from manager.federation.decisions import actions as do
from manager.federation.decisions.jobsync import RunEnd, SyncFacts, finish
from manager.federation.engine.externalkinds import owner_uids
from manager.kube.resources import Resource

WIDGETS = Resource("example.kfed.io", "v1", "widgets", "Widget", True)
WIDGET = ExternalKind(WIDGETS)
KUBECONFIG = ["--kubeconfig", "/dev/null"]


@pytest.mark.parametrize(
    ("text", "gvk"),
    [
        ("Widget.v1.example.kfed.io", GroupVersionKind("example.kfed.io", "v1", "Widget")),
        ("PipelineRun.v1.tekton.dev", GroupVersionKind("tekton.dev", "v1", "PipelineRun")),
        ("AppWrapper.v1beta2.workload.codeflare.dev",
         GroupVersionKind("workload.codeflare.dev", "v1beta2", "AppWrapper")),
    ],
)  # fmt: skip
def test_a_kind_is_named_as_upstream_names_it(text: str, gvk: GroupVersionKind) -> None:
    assert parse_gvk(text) == gvk
    assert gvk.name == text


@pytest.mark.parametrize(
    "text", ["Widget", "Widget.v1", "Widget..example.com", ".v1.example.com", "widget.v1.x.io"]
)
def test_a_name_not_of_that_form_is_refused_saying_the_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"Kind\.version\.group"):
        parse_gvk(text)


def test_both_lists_are_taken_as_upstream_writes_them() -> None:
    checked = check(
        integrations=["Widget.v1.example.kfed.io"],
        multikueue=[{"name": "Widget.v1.example.kfed.io"}, {"name": "Gadget.v2.example.kfed.io"}],
    )
    assert checked.integrations == ("Widget.v1.example.kfed.io",)
    assert [f.name for f in checked.multikueue] == [
        "Widget.v1.example.kfed.io",
        "Gadget.v2.example.kfed.io",
    ]


@pytest.mark.parametrize(
    ("integrations", "multikueue", "says"),
    [
        ([], [{"name": "Widget"}], "multiKueue.externalFrameworks[0].name: 'Widget' is not"),
        (["Widget.v1"], [], "integrations.externalFrameworks[0]: 'Widget.v1' is not"),
        ([], [{"nmae": "Widget.v1.x.io"}], "multiKueue.externalFrameworks[0].nmae: Extra inputs"),
        ([], [{}], "multiKueue.externalFrameworks[0].name: Field required"),
        ([], "Widget.v1.x.io", "multiKueue.externalFrameworks: Input should be a valid"),
        (
            [],
            [{"name": "Widget.v1.x.io"}, {"name": "Widget.v1.x.io"}],
            "multiKueue.externalFrameworks[1]: 'Widget.v1.x.io' is there twice",
        ),
        (
            ["JobSet.v1alpha2.jobset.x-k8s.io"],
            [],
            "integrations.externalFrameworks[0]: 'JobSet.v1alpha2.jobset.x-k8s.io' is the "
            "built-in integration jobset.x-k8s.io/jobset",
        ),
    ],
    ids=["no version", "no group", "a misspelt key", "no name", "not a list", "twice", "built-in"],
)
def test_a_bad_entry_is_a_clear_error_naming_where_it_is(
    integrations: Any, multikueue: Any, says: str
) -> None:
    with pytest.raises(ValueError) as refused:
        check(integrations, multikueue, built_in=built_in())
    assert says in str(refused.value)


def test_the_flag_takes_comma_separated_names_checked_alike() -> None:
    assert names_flag("Widget.v1.x.io, Gadget.v1.x.io") == ("Widget.v1.x.io", "Gadget.v1.x.io")
    assert names_flag("") == ()
    with pytest.raises(ValueError, match="twice"):
        names_flag("Widget.v1.x.io,Widget.v1.x.io")


CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  externalFrameworks: [Widget.v1.example.kfed.io]
multiKueue:
  externalFrameworks:
  - name: Widget.v1.example.kfed.io
  - name: PipelineRun.v1.tekton.dev
"""


def _args(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return manager_main.parse_args([*KUBECONFIG, "--config", str(path)])


def test_the_configuration_file_federates_the_kinds_it_lists_without_a_warning(
    tmp_path: Path,
) -> None:
    args = _args(tmp_path, CONFIG)
    settings = manager_main.settings_from(args)
    assert settings.external_frameworks == (
        "Widget.v1.example.kfed.io",
        "PipelineRun.v1.tekton.dev",
    )
    assert args.config_warnings == []


def test_a_bad_entry_in_the_file_stops_the_manager_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = CONFIG.replace("PipelineRun.v1.tekton.dev", "PipelineRun.tekton")
    with pytest.raises(SystemExit) as ended:
        _args(tmp_path, bad)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "multiKueue.externalFrameworks[1].name: 'PipelineRun.tekton' is not" in err, err


def test_with_upstreams_feature_gate_off_the_list_is_ignored_as_upstream_ignores_it(
    tmp_path: Path,
) -> None:
    args = _args(tmp_path, CONFIG + "featureGates: {MultiKueueAdaptersForCustomJobs: false}\n")
    assert manager_main.settings_from(args).external_frameworks == ()
    [warning] = args.config_warnings
    assert "multiKueue.externalFrameworks: ignored" in warning


def widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.kfed.io/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "12345678",
            "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "9"}],
        },
        "spec": spec,
        "status": {"phase": "Running", "hosts": 2},
    }


def test_the_workers_copy_is_the_spec_less_managed_by_and_nothing_added() -> None:
    job = widget(managedBy="kueue.x-k8s.io/multikueue", size=3, suspend=False)
    assert WIDGET.spec_for_worker(job) == {"size": 3, "suspend": False}
    assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue", "the manager's is left"
    assert WIDGET.managed_by(job) == "kueue.x-k8s.io/multikueue"


def test_its_status_comes_back_whole() -> None:
    assert WIDGET.status_for_manager(widget()) == {"phase": "Running", "hosts": 2}


def test_kfed_knows_neither_its_pod_sets_nor_its_end_nor_how_to_suspend_it() -> None:
    job = widget()
    assert WIDGET.pod_sets(job) == []
    assert WIDGET.outcome(job) is None
    assert not WIDGET.suspendable and not WIDGET.workload_finished_by_job
    assert WIDGET.workload_prefix == "widget"


def test_a_workload_its_controller_made_is_known_as_its_own() -> None:
    workload: dict[str, Any] = {
        "metadata": {
            "name": "anything",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": "example.kfed.io/v1",
                    "kind": "Widget",
                    "name": "w",
                    "controller": True,
                }
            ],
        }
    }
    assert WIDGET.owner_of(workload) == "ns/w"
    workload["metadata"]["ownerReferences"][0]["apiVersion"] = "example.kfed.io/v2"
    assert WIDGET.owner_of(workload) is None


def test_its_resource_is_found_in_discovery_never_a_subresource() -> None:
    gvk = parse_gvk("Widget.v1.example.kfed.io")
    discovered = [
        {"name": "widgets/status", "kind": "Widget", "namespaced": True},
        {"name": "gadgets", "kind": "Gadget", "namespaced": True},
        {"name": "widgets", "kind": "Widget", "namespaced": True},
    ]
    assert resource_from(gvk, discovered) == WIDGETS
    assert resource_from(gvk, discovered[:2]) is None


def test_its_run_ends_from_the_copys_end_after_its_status() -> None:
    """Upstream's MultiKueue finishes the manager's Workload from the worker's for every kind;
    kfed's own kinds are finished by its job controller from their status."""
    facts = SyncFacts("worker-1", {}, {"phase": "Done"}, finished_by_job=False)
    end = RunEnd(True, "done there")
    assert finish(facts, end) == [
        do.PatchJobStatus({"phase": "Done"}),
        do.FinishWorkload(True, "done there"),
    ]
    assert finish(facts, None) == [do.PatchJobStatus({"phase": "Done"})]
    assert finish(SyncFacts("worker-1", {}, {"phase": "Done"}), end) == [
        do.PatchJobStatus({"phase": "Done"})
    ]


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "external"


def test_the_example_configuration_federates_its_kind_and_its_roles_name_it() -> None:
    args = manager_main.parse_args([*KUBECONFIG, "--config", str(EXAMPLE / "manager-config.yaml")])
    assert manager_main.settings_from(args).external_frameworks == ("Widget.v1.example.com",)
    assert args.config_warnings == []
    gvk = parse_gvk("Widget.v1.example.com")
    roles = {
        d["metadata"]["name"]: d for d in yaml.safe_load_all((EXAMPLE / "rbac.yaml").read_text())
    }
    for role in roles.values():
        assert {g for r in role["rules"] for g in r["apiGroups"]} == {gvk.group}
    verbs = {r["resources"][0]: set(r["verbs"]) for r in roles["kfed-manager-widgets"]["rules"]}
    assert verbs == {
        "widgets": {"get", "list", "watch"},
        "widgets/status": {"get", "patch", "update"},
    }
    [worker] = roles["kfed-worker-widgets"]["rules"]
    assert {"create", "delete", "list", "watch"} <= set(worker["verbs"])


def test_the_flag_naming_a_kind_kfed_federates_itself_stops_the_manager(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        manager_main.parse_args(
            [*KUBECONFIG, "--multikueue-external-frameworks", "JobSet.v1alpha2.jobset.x-k8s.io"]
        )
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "is the built-in integration jobset.x-k8s.io/jobset" in err, err
    args = manager_main.parse_args([*KUBECONFIG, "--multikueue-external-frameworks", "W.v1.x.io"])
    assert manager_main.settings_from(args).external_frameworks == ("W.v1.x.io",)


def test_a_job_finds_the_workload_its_controller_named_as_it_liked() -> None:
    """Its controller names its Workload as it likes: a change of the job wakes the
    workload it owns (by the owner reference's uid), not one of kfed's naming."""
    owned = {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]}}
    assert owner_uids(owned) == ["u1"]
    assert owner_uids({"metadata": {"ownerReferences": [{"uid": "u1"}]}}) == []
    job = widget()
    found = ExternalKind(WIDGETS, lambda j: f"ns/wl-of-{j['metadata']['name']}")
    assert found.workload_key(job) == "ns/wl-of-w"
    unknown = ExternalKind(WIDGETS, lambda _j: None)
    assert unknown.workload_key(job) == WIDGET.workload_key(job) == "ns/widget-w-12345"
