"""`kfed explain`, `kfed logs` and `kfed submit` find their objects as `kfed workloads` does
(issue #34): in -n/--namespace, else the kubeconfig context's namespace, else ``default``; a
NAMESPACE/NAME argument (or a manifest's own namespace) still names its namespace, and a -n that
contradicts it is a usage error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from manager.cli import logs, submission, submit, workloadinfo, workloads
from manager.cli.common import EXIT_USAGE, CliError
from manager.cli.main import main
from manager.cli.target import Target, namespaced_name

Obj = dict[str, Any]
CONTEXT_NAMESPACE = "ml-jobs"


def kubeconfig(path: Path, namespace: str | None = CONTEXT_NAMESPACE) -> str:
    context: Obj = {"cluster": "c", "user": "u"} | ({"namespace": namespace} if namespace else {})
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "ctx",
                "contexts": [{"name": "ctx", "context": context}],
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return str(path)


# -- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "given", "group", "expected"),
    [
        ("light-job", None, None, (CONTEXT_NAMESPACE, "light-job")),
        ("light-job", "team-a", None, ("team-a", "light-job")),
        ("light-job", None, "team-b", ("team-b", "light-job")),
        ("light-job", "team-a", "team-b", ("team-a", "light-job")),
        ("team-a/light-job", None, None, ("team-a", "light-job")),
        ("team-a/light-job", "team-a", None, ("team-a", "light-job")),
    ],
    ids=["context's", "-n", "group's -n", "subcommand's -n wins", "in the key", "both agree"],
)
def test_a_name_is_found_in_the_namespace_kubectl_would_use(
    tmp_path: Path,
    key: str,
    given: str | None,
    group: str | None,
    expected: tuple[str, str],
) -> None:
    target = Target(kubeconfig(tmp_path / "k"), objects_namespace=group)
    assert namespaced_name(target, key, given) == expected


def test_without_a_context_namespace_a_name_is_in_default(tmp_path: Path) -> None:
    target = Target(kubeconfig(tmp_path / "k", namespace=None))
    assert namespaced_name(target, "light-job", None) == ("default", "light-job")


@pytest.mark.parametrize(
    ("key", "given", "says"),
    [
        ("team-a/light-job", "team-b", "names namespace team-a, but -n/--namespace says team-b"),
        ("team-a/", None, "is not [NAMESPACE/]NAME"),
        ("/light-job", None, "is not [NAMESPACE/]NAME"),
        ("a/b/c", None, "is not [NAMESPACE/]NAME"),
        ("", None, "is not [NAMESPACE/]NAME"),
    ],
)
def test_a_key_that_names_no_single_object_is_a_usage_error(
    tmp_path: Path, key: str, given: str | None, says: str
) -> None:
    with pytest.raises(CliError) as refused:
        namespaced_name(Target(kubeconfig(tmp_path / "k")), key, given)
    assert refused.value.code == EXIT_USAGE
    assert says in refused.value.message


# -- the commands, up to the first read of the manager ----------------------------------------


class _Manager:
    """Stands for the manager's API where a command connects; nothing is read through it."""

    async def __aenter__(self) -> _Manager:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None


async def _connect(_: Target) -> _Manager:
    return _Manager()


@pytest.fixture
def looked_up(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """The (namespace, name) each command asks the manager for; the command then stops."""
    seen: list[tuple[str, str]] = []

    async def resolve(_: object, namespace: str, name: str) -> tuple[Obj, None]:
        seen.append((namespace, name))
        raise CliError("stopped here by the test")

    async def check_queues(_: object, jobs: list[Obj]) -> None:
        seen.extend((j["metadata"]["namespace"], j["metadata"]["name"]) for j in jobs)
        raise CliError("stopped here by the test")

    for module in (workloads, logs, submit):
        monkeypatch.setattr(module, "connect_manager", _connect)
    monkeypatch.setattr(workloadinfo, "resolve", resolve)
    monkeypatch.setattr(submission, "check_queues", check_queues)
    yield seen


def kfed(tmp_path: Path, *args: str, manifest: str | None = None) -> tuple[int, str]:
    config = kubeconfig(tmp_path / "kubeconfig")
    result = CliRunner().invoke(main, [*args, "--kubeconfig", config], input=manifest)
    return result.exit_code, result.stderr


@pytest.mark.parametrize("command", ["explain", "logs"])
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["heavy-job"], (CONTEXT_NAMESPACE, "heavy-job")),
        (["heavy-job", "-n", "team-a"], ("team-a", "heavy-job")),
        (["heavy-job", "--namespace", "team-a"], ("team-a", "heavy-job")),
        (["team-b/heavy-job"], ("team-b", "heavy-job")),
    ],
    ids=["context's", "-n", "--namespace", "NAMESPACE/NAME"],
)
def test_explain_and_logs_look_where_workloads_does(
    tmp_path: Path,
    looked_up: list[tuple[str, str]],
    command: str,
    args: list[str],
    expected: tuple[str, str],
) -> None:
    code, stderr = kfed(tmp_path, command, *args)
    assert (code, looked_up) == (1, [expected]), stderr


@pytest.mark.parametrize("command", ["explain", "logs"])
def test_a_group_level_namespace_counts_for_explain_and_logs(
    tmp_path: Path, looked_up: list[tuple[str, str]], command: str
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig")
    result = CliRunner().invoke(main, ["--kubeconfig", config, "-n", "team-c", command, "job"])
    assert looked_up == [("team-c", "job")], result.stderr
    assert "deprecated" not in result.stderr


@pytest.mark.parametrize("command", ["explain", "logs"])
def test_explain_and_logs_refuse_a_namespace_that_contradicts_the_key(
    tmp_path: Path, looked_up: list[tuple[str, str]], command: str
) -> None:
    code, stderr = kfed(tmp_path, command, "team-b/heavy-job", "-n", "team-a")
    assert code == EXIT_USAGE
    assert "names namespace team-b, but -n/--namespace says team-a" in stderr
    assert looked_up == []


def test_logs_still_takes_kfeds_namespace_by_its_own_flag(
    tmp_path: Path, looked_up: list[tuple[str, str]]
) -> None:
    code, stderr = kfed(tmp_path, "logs", "job", "--kfed-namespace", "kfed-system")
    assert (code, looked_up) == (1, [(CONTEXT_NAMESPACE, "job")]), stderr


JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: %s%s}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
"""


def job(name: str, namespace: str | None = None) -> str:
    return JOB % (name, f", namespace: {namespace}" if namespace else "")


@pytest.mark.parametrize(
    ("manifest", "args", "expected"),
    [
        (job("a"), [], [(CONTEXT_NAMESPACE, "a")]),
        (job("a"), ["-n", "team-a"], [("team-a", "a")]),
        (job("a", "team-b"), [], [("team-b", "a")]),
        (job("a", "team-b"), ["-n", "team-b"], [("team-b", "a")]),
        (job("a") + "---" + job("b", "team-b"), [], [(CONTEXT_NAMESPACE, "a"), ("team-b", "b")]),
    ],
    ids=["context's", "-n", "the manifest's", "both agree", "each its own"],
)
def test_submit_creates_jobs_where_kubectl_create_would(
    tmp_path: Path,
    looked_up: list[tuple[str, str]],
    manifest: str,
    args: list[str],
    expected: list[tuple[str, str]],
) -> None:
    code, stderr = kfed(tmp_path, "submit", "-", "--queue", "lq", *args, manifest=manifest)
    assert (code, looked_up) == (1, expected), stderr


def test_submit_refuses_a_namespace_that_contradicts_the_manifest(
    tmp_path: Path, looked_up: list[tuple[str, str]]
) -> None:
    code, stderr = kfed(tmp_path, "submit", "-", "-q", "lq", "-n", "a", manifest=job("j", "b"))
    assert code == EXIT_USAGE
    assert "Job b/j is in namespace b, but -n/--namespace says a" in stderr
    assert looked_up == [], "nothing is created"
