"""The `kfed` command as a user meets it: complete --help everywhere, and expected errors as
one line on stderr with a meaningful exit code, never a traceback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from manager.cli.common import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    from_kube_error,
    split_key,
)
from manager.cli.main import main
from manager.kube import errors


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


ALL = list(_commands(main))
REPO = Path(__file__).resolve().parents[3]


def test_the_expected_commands_exist() -> None:
    for command in [
        ("cluster", "add"),
        ("cluster", "list"),
        ("cluster", "remove"),
        ("cluster", "cordon"),
        ("cluster", "drain"),
        ("cluster", "uncordon"),
        ("submit",),
        ("workloads",),
        ("explain",),
        ("whatif",),
    ]:
        assert command in ALL


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="kfed")
    assert result.exit_code == 0, result.output
    assert "Usage: kfed " + " ".join(path) in result.output
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    assert command.help and len(command.help) > 40, "a real description, not a stub"
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help, f"option {param.opts} has no help"


@pytest.mark.parametrize(
    ("path", "option"),
    [
        (p, o)
        for p in ALL
        if p[0] in ("cluster", "submit", "workloads", "explain", "whatif") and p != ("cluster",)
        for o in ("--kubeconfig", "--context")
    ],
)
def test_every_cluster_command_takes_the_manager_connection(
    path: tuple[str, ...], option: str
) -> None:
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="kfed")
    assert option in result.output


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), prog_name="kfed")
    return result.exit_code, result.stdout, result.stderr


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in stderr
    return lines[0]


def test_a_missing_manager_kubeconfig_is_a_usage_error(tmp_path: Path) -> None:
    code, _, stderr = _invoke("cluster", "list", "--kubeconfig", str(tmp_path / "none"))
    assert code == EXIT_USAGE
    assert "--kubeconfig/--context" in _one_error_line(stderr)


def test_a_missing_manager_context_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_manager_kubeconfig(1)))
    code, _, stderr = _invoke("workloads", "--kubeconfig", str(path), "--context", "nope")
    assert code == EXIT_USAGE
    assert "context nope" in _one_error_line(stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manager_kubeconfig(port: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "m",
        "clusters": [
            {
                "name": "m",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "u"}}],
    }


def test_an_unreachable_manager_exits_3(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_manager_kubeconfig(_free_port())))
    code, _, stderr = _invoke("cluster", "list", "--kubeconfig", str(path))
    assert code == EXIT_UNREACHABLE
    line = _one_error_line(stderr)
    assert "cannot reach manager https://127.0.0.1:" in line


def test_an_unsafe_worker_kubeconfig_is_refused_before_connecting(tmp_path: Path) -> None:
    worker = _manager_kubeconfig(6443)  # insecure-skip-tls-verify: refused for a worker
    path = tmp_path / "worker"
    path.write_text(yaml.safe_dump(worker))
    code, stdout, stderr = _invoke(
        "cluster",
        "add",
        "worker-1",
        "--kubeconfig-file",
        str(path),
        "--kubeconfig",
        str(tmp_path / "no-manager-needed"),
    )
    assert code == EXIT_USAGE
    assert "InsecureKubeConfig" in _one_error_line(stderr)
    assert stdout == ""


def test_a_file_that_is_not_a_job_is_refused_before_connecting(tmp_path: Path) -> None:
    path = tmp_path / "service.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: p}\n")
    for command in ("submit", "whatif"):
        code, _, stderr = _invoke(command, str(path), "--kubeconfig", str(tmp_path / "none"))
        assert code == EXIT_USAGE
        assert "not a kind of job kfed queues (batch/v1 Job" in _one_error_line(stderr)


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    code, _, stderr = _invoke("submit", str(tmp_path / "missing.yaml"))
    assert code == EXIT_USAGE
    assert "cannot read" in _one_error_line(stderr)


def test_explain_wants_one_name_perhaps_in_its_namespace() -> None:
    code, _, stderr = _invoke("explain", "ml-jobs/heavy-job/again")
    assert code == EXIT_USAGE
    assert "[NAMESPACE/]NAME" in _one_error_line(stderr)
    assert split_key("ml-jobs/heavy-job") == ("ml-jobs", "heavy-job")


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        (errors.Unreachable("manager https://m:6443: refused"), EXIT_UNREACHABLE, "cannot reach"),
        (errors.from_status(401, {"message": "bad token"}), EXIT_UNREACHABLE, "credentials"),
        (errors.from_status(403, {"message": "no"}), EXIT_FAILED, "RBAC"),
        (
            errors.from_status(
                404, {"message": "the server could not find the requested resource"}
            ),
            EXIT_FAILED,
            "CRDs installed",
        ),
        (errors.from_status(422, {"message": "spec.x: Invalid"}), EXIT_USAGE, "refused the object"),
        (errors.from_status(500, {"message": "boom"}), EXIT_FAILED, "500"),
    ],
)
def test_api_errors_map_to_exit_codes(error: errors.KubeError, code: int, text: str) -> None:
    mapped = from_kube_error(error)
    assert mapped.code == code
    assert text in mapped.message
    assert "\n" not in mapped.message


def test_the_installed_command_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from manager.cli.main import main; main()",
            "workloads",
            "-A",
            "--kubeconfig",
            str(tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == EXIT_USAGE
    assert result.stdout == ""
    _one_error_line(result.stderr)


# -- connection options before or after the subcommand --------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["workloads", "-A"],
        ["explain", "ml-jobs/light-job"],
        ["cluster", "list"],
        ["cluster", "add", "worker-1", "--kubeconfig-file", "WORKER"],
        ["whatif", "examples/article/03-heavy-job.yaml"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_the_manager_kubeconfig_is_accepted_before_the_subcommand(
    argv: list[str], tmp_path: Path
) -> None:
    """docs/quickstart.md writes `kfed --kubeconfig F workloads -A`: the group takes it too."""
    from manager.cli.target import Target, target_of

    captured: list[Target] = []

    @click.command()
    def probe() -> None:
        captured.append(target_of(None, None, None))

    main.add_command(probe, "probe-target")
    try:
        result = CliRunner().invoke(
            main, ["--kubeconfig", "/tmp/m.kubeconfig", "--context", "c", "probe-target"]
        )
    finally:
        main.commands.pop("probe-target")
    assert result.exit_code == 0, result.output
    assert captured == [Target("/tmp/m.kubeconfig", "c", "kueue-system")]
    # And the real command line parses (no "No such option"); connecting is a later step.
    worker = tmp_path / "worker.kubeconfig"
    worker.write_text(yaml.safe_dump(_inline_kubeconfig()))
    argv = [
        str(worker) if a == "WORKER" else str(REPO / a) if a.startswith("examples/") else a
        for a in argv
    ]
    parsed = CliRunner().invoke(main, ["--kubeconfig", "/nonexistent/kubeconfig", *argv])
    assert "No such option" not in parsed.output, parsed.output
    assert "/nonexistent/kubeconfig" in parsed.output, parsed.output


def _inline_kubeconfig() -> dict[str, object]:
    """A worker kubeconfig kfed's checks accept (inline CA and token), reaching nothing."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "w",
                "cluster": {
                    "server": "https://127.0.0.1:1",
                    "certificate-authority-data": "LS0tLS1CRUdJTg==",
                },
            }
        ],
        "users": [{"name": "w", "user": {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
        "current-context": "w",
    }


def test_the_subcommands_own_connection_option_wins_over_the_groups() -> None:
    from manager.cli.target import Target, target_of

    captured: list[Target] = []

    @click.command()
    def probe() -> None:
        captured.append(target_of("/tmp/own", None, "team-ns"))

    main.add_command(probe, "probe-target")
    try:
        CliRunner().invoke(main, ["--kubeconfig", "/tmp/group", "--context", "g", "probe-target"])
    finally:
        main.commands.pop("probe-target")
    assert captured == [Target("/tmp/own", "g", "team-ns")]
