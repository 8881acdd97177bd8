"""kubectl's habits in `kfed` (issue #34): -n is the objects' namespace (default: the kubeconfig
context's), --kfed-namespace kfed's own, -o only a format, -l and --state on workloads, Go
durations everywhere, `kfed completion`, and the deprecated spellings that still work."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from manager.cli import workloadinfo
from manager.cli.durations import Duration, format_duration, parse_duration
from manager.cli.kubeconfigs import context_namespace
from manager.cli.main import main
from manager.cli.tables import print_data
from manager.cli.target import DEFAULT_NAMESPACE, Target, objects_namespace, target_of

# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h30m", 5400), ("500ms", 0.5), ("2d", 172800), ("0", 0)],
)
def test_go_durations_are_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "0.5", "1.5"])
def test_a_bare_number_is_refused_with_a_hint(text: str) -> None:
    with pytest.raises(ValueError, match=f"write {text}s"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["", "5x", "m5", "1h 30m", "-5s"])
def test_a_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration_round_trips() -> None:
    for seconds in (0.25, 1, 45, 120, 5400, 86400):
        assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_every_duration_option_is_a_go_duration() -> None:
    """No option of the CLI takes bare seconds any more."""

    def commands(group: click.Group) -> list[click.Command]:
        found: list[click.Command] = []
        for command in group.commands.values():
            found.append(command)
            if isinstance(command, click.Group):
                found += commands(command)
        return found

    names = {"timeout", "hold", "interval", "duration"}
    options = [
        p
        for c in commands(main)
        for p in c.params
        if isinstance(p, click.Option) and p.name in names
    ]
    assert len(options) >= 8
    assert all(isinstance(o.type, Duration) for o in options), options


def test_a_bare_number_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["submit", "x.yaml", "--timeout", "30", "--kubeconfig", str(tmp_path / "none")]
    )
    assert result.exit_code == 2
    assert "write 30s" in result.output


def test_duration_bounds_are_usage_errors() -> None:
    result = CliRunner().invoke(
        main, ["drill", "partition", "--cluster", "w", "--interval", "10s", "--kubeconfig", "/x"]
    )
    assert result.exit_code == 2
    assert "over the maximum 5s" in result.output


# -- namespaces ------------------------------------------------------------------------------


def _kubeconfig(path: Path, namespace: str | None, current: str = "ctx") -> Path:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": current,
                "contexts": [{"name": "ctx", "context": context}, {"name": "other", "context": {}}],
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return path


def test_the_objects_namespace_defaults_to_the_contexts(tmp_path: Path) -> None:
    config = str(_kubeconfig(tmp_path / "k", "ml-jobs"))
    assert context_namespace(config, None) == "ml-jobs"
    assert context_namespace(config, "other") is None
    target = Target(config)
    assert objects_namespace(target, None) == "ml-jobs"
    assert objects_namespace(target, "team-a") == "team-a"
    assert objects_namespace(target, None, all_namespaces=True) is None
    assert objects_namespace(Target(config, "other"), None) == "default"
    assert objects_namespace(Target(str(tmp_path / "missing")), None) == "default"


def test_a_group_level_namespace_is_the_objects_namespace(tmp_path: Path) -> None:
    config = str(_kubeconfig(tmp_path / "k", "ml-jobs"))
    seen: list[str | None] = []

    @click.command()
    def probe() -> None:
        seen.append(objects_namespace(target_of(None, None), None))

    main.add_command(probe, "probe-ns")
    try:
        result = CliRunner().invoke(main, ["--kubeconfig", config, "-n", "team-b", "probe-ns"])
    finally:
        main.commands.pop("probe-ns")
    assert result.exit_code == 0, result.output
    assert seen == ["team-b"]


def _kfed_namespace_of(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, str]:
    """kfed's namespace `cluster list` would use (and stderr), without connecting."""
    import manager.cli.cluster as cluster

    seen: list[str] = []

    async def fake_list(target: Target, output: str) -> None:
        seen.append(target.namespace)

    original = cluster._list
    cluster._list = fake_list
    try:
        result = CliRunner().invoke(main, argv, env=env or {})
    finally:
        cluster._list = original
    assert result.exit_code == 0, result.output
    return seen[0], result.stderr


def test_kfed_namespace_has_its_own_flag_and_env() -> None:
    assert _kfed_namespace_of(["cluster", "list"], {"KFED_NAMESPACE": ""})[0] == DEFAULT_NAMESPACE
    assert _kfed_namespace_of(["cluster", "list", "--kfed-namespace", "k"])[0] == "k"
    assert _kfed_namespace_of(["--kfed-namespace", "g", "cluster", "list"])[0] == "g"
    assert _kfed_namespace_of(["cluster", "list"], {"KFED_NAMESPACE": "e"})[0] == "e"


def test_the_old_namespace_flag_still_names_kfeds_namespace_with_a_warning() -> None:
    namespace, stderr = _kfed_namespace_of(["cluster", "list", "--namespace", "old"])
    assert namespace == "old"
    assert "deprecated" in stderr and "--kfed-namespace" in stderr
    namespace, _ = _kfed_namespace_of(
        ["cluster", "list", "--namespace", "old"], {"KFED_NAMESPACE": "e"}
    )
    assert namespace == "old", "given on the command line, it beats the environment"
    namespace, stderr = _kfed_namespace_of(["--namespace", "old", "cluster", "list"])
    assert namespace == "old"
    assert "deprecated" in stderr


def test_workloads_namespace_means_the_jobs_namespace() -> None:
    result = CliRunner().invoke(main, ["workloads", "--help"])
    assert "-A, --all-namespaces" in result.output
    assert "-n, --namespace" in result.output
    assert "--kfed-namespace NAMESPACE" not in result.output


# -- outputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "formats"),
    [
        (["workloads"], "table|wide|json|yaml|name"),
        (["cluster", "list"], "table|wide|json|yaml|name"),
        (["explain"], "text|json|yaml"),
        (["whatif"], "text|json|yaml"),
    ],
)
def test_output_is_only_a_format(path: list[str], formats: str) -> None:
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert f"[{formats}]" in result.output


def test_json_and_yaml_print_the_same_data(capsys: pytest.CaptureFixture[str]) -> None:
    from manager.cli.common import console

    rows = [{"name": "a", "state": "Pending"}]
    assert print_data(console(), "json", rows)
    assert json.loads(capsys.readouterr().out) == rows
    assert print_data(console(), "yaml", rows)
    assert yaml.safe_load(capsys.readouterr().out) == rows
    assert not print_data(console(), "table", rows)


def test_crds_writes_to_out_dir_and_the_old_output_still_works(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["crds", "--out-dir", str(tmp_path / "new")])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "new").glob("*.yaml"))
    old = CliRunner().invoke(main, ["crds", "-o", str(tmp_path / "old")])
    assert old.exit_code == 0, old.output
    assert "deprecated" in old.stderr and "--out-dir" in old.stderr
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == sorted(
        p.name for p in (tmp_path / "new").iterdir()
    )


def test_the_drill_report_has_its_own_flag_and_the_old_one_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from manager.cli.drills import run as drillrun

    seen: list[Any] = []

    async def fake(target: Target, opts: Any) -> int:
        seen.append(opts)
        return 0

    monkeypatch.setattr(drillrun, "drill", fake)
    base = ["drill", "maintenance", "--cluster", "w", "--kubeconfig", "/x"]
    result = CliRunner().invoke(main, [*base, "--report", "r.json", "--hold", "30s"])
    assert result.exit_code == 0, result.output
    assert seen[-1].output == "r.json"
    assert seen[-1].hold == 30
    assert seen[-1].timeout == 120
    assert seen[-1].interval == 0.25
    result = CliRunner().invoke(main, [*base, "-o", "old.json"])
    assert result.exit_code == 0, result.output
    assert seen[-1].output == "old.json"
    assert "deprecated" in result.stderr and "--report" in result.stderr
    result = CliRunner().invoke(main, base)
    assert seen[-1].output is None


# -- workloads: selector and state -----------------------------------------------------------


def _workload(name: str, state: str = "Pending") -> dict[str, Any]:
    wl: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"team": "a"},
            "ownerReferences": [{"kind": "Job", "name": name, "controller": True}],
        },
        "spec": {"queueName": "lq", "priority": 5},
        "status": {},
    }
    if state == "Finished":
        wl["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    return wl


class _Api:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.calls: list[tuple[str | None, str | None]] = []

    async def list(
        self, res: Any, namespace: str | None = None, label_selector: str | None = None
    ) -> dict[str, Any]:
        self.calls.append((namespace, label_selector))
        return {"items": self.items}


def test_the_selector_goes_to_the_api_server() -> None:
    api = _Api([_workload("a")])
    items = asyncio.run(workloadinfo.list_workload_objects(api, "ml", "team=a"))  # type: ignore[arg-type]
    assert [i["metadata"]["name"] for i in items] == ["a"]
    assert api.calls == [("ml", "team=a")]


def test_state_filter() -> None:
    rows = workloadinfo.workload_rows([_workload("p"), _workload("f", "Finished")], now=0)
    assert [r.name for r in rows if workloadinfo.state_matches(r, ("pending",))] == ["p"]
    assert [r.name for r in rows if workloadinfo.state_matches(r, ("FINISHED",))] == ["f"]
    assert [r.name for r in rows if workloadinfo.state_matches(r, ())] == ["f", "p"]
    assert not [r for r in rows if workloadinfo.state_matches(r, ("running",))]


def test_wide_columns() -> None:
    wl = _workload("a")
    wl["status"]["admission"] = {"clusterQueue": "gpu-cq"}
    assert workloadinfo.wide_columns(wl) == ("gpu-cq", "5", "Job/a")


def test_workloads_filters_parse() -> None:
    result = CliRunner().invoke(
        main, ["workloads", "--state", "bogus", "--kubeconfig", "/nonexistent"]
    )
    assert result.exit_code == 2
    result = CliRunner().invoke(
        main,
        ["workloads", "-l", "team=a", "--state", "Running", "-o", "name", "--kubeconfig", "/x"],
    )
    assert result.exit_code == 2  # parsed; the missing kubeconfig is the usage error
    assert "kubeconfig /x not found" in result.stderr


# -- completion ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "marker"), [("bash", "complete"), ("zsh", "compdef"), ("fish", "complete")]
)
def test_completion_prints_clicks_script(shell: str, marker: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell], prog_name="kfed")
    assert result.exit_code == 0, result.output
    assert "_KFED_COMPLETE" in result.output
    assert marker in result.output


def test_completion_refuses_other_shells() -> None:
    result = CliRunner().invoke(main, ["completion", "powershell"])
    assert result.exit_code == 2
