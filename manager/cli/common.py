"""What every ``kfed`` command shares: the exit codes, one-line errors, running an async
command body, reading its input and printing its output.

Exit codes: 0 ok; 1 the operation failed or timed out; 2 bad input or usage (click's own
usage errors are 2 as well); 3 a cluster cannot be reached (or refuses our credentials);
4 a drill saw a probe run on two clusters at once; 130 interrupted (Ctrl-C).

Expected failures are raised as ``CliError`` (or a ``manager.kube.errors.KubeError``, mapped
here) and printed as one line on stderr, never as a traceback. The options every command
shares live beside this module: ``target`` (the manager cluster and the namespaces),
``kubeconfigs`` (connecting), ``options`` (``-o``, renamed options) and ``durations``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import yaml
from rich.console import Console

from manager.kube import errors

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_DOUBLE_RUN = 4
"""``kfed drill``: a probe ran on two clusters at once."""
EXIT_INTERRUPTED = 130

T = TypeVar("T")


class CliError(Exception):
    """An expected failure: one line for the user (what, where, what to do) and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def usage_error(message: str) -> CliError:
    return CliError(message, EXIT_USAGE)


# -- errors -----------------------------------------------------------------------------------


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def from_kube_error(err: errors.KubeError, where: str = "the manager cluster") -> CliError:
    """One line (what, where, what to do) and an exit code for an API error."""
    message = err.message.strip().splitlines()[0] if err.message.strip() else err.reason
    if isinstance(err, errors.Unreachable):
        return CliError(
            f"cannot reach {message}; check the kubeconfig and context, and that the API "
            "server is up",
            EXIT_UNREACHABLE,
        )
    if isinstance(err, errors.Unauthorized):
        return CliError(
            f"{where} rejected our credentials (401 Unauthorized): {message}; "
            "refresh the kubeconfig",
            EXIT_UNREACHABLE,
        )
    if isinstance(err, errors.Forbidden):
        return CliError(
            f"{where} forbids it (403): {message}; ask an admin for the RBAC permission",
            EXIT_FAILED,
        )
    if isinstance(err, errors.NotFound) and "could not find the requested resource" in message:
        return CliError(
            f"{where} does not serve this kind ({message}): are kfed's CRDs installed? "
            "(kubectl apply -f crds/)",
            EXIT_FAILED,
        )
    if isinstance(err, errors.Invalid | errors.BadRequest):
        return CliError(f"{where} refused the object: {message}", EXIT_USAGE)
    return CliError(f"{where}: {err.status} {err.reason}: {message}", EXIT_FAILED)


def fail(error: CliError) -> NoReturn:
    click.echo(f"error: {error.message}", err=True)
    sys.exit(error.code)


def run(coro: Coroutine[Any, Any, T], *, where: str = "the manager cluster") -> T:
    """Run a command's async body; expected errors become one line on stderr and an exit code."""
    try:
        return asyncio.run(coro)
    except CliError as err:
        fail(err)
    except errors.KubeError as err:
        fail(from_kube_error(err, where))
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)


# -- input ------------------------------------------------------------------------------------


def split_key(value: str, *, what: str = "NAMESPACE/NAME") -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise usage_error(f"{value!r} is not {what} (for example team-a/light-job)")
    return namespace, name


def read_text(path: str) -> str:
    """A file's text, or stdin for ``-``; a missing file is a usage error."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as err:
        raise usage_error(f"cannot read {path}: {err.strerror or err}") from None


def load_yaml_documents(text: str, source: str) -> list[Any]:
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as err:
        raise usage_error(f"{source} is not valid YAML: {first_line(err)}") from None


# -- output -----------------------------------------------------------------------------------


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr). Text from clusters is printed literally (no
    markup, no emoji codes). Output that is not a terminal gets a wide page, so that piped
    tables keep one row per line."""
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else max(probe.width, 200)
    return Console(stderr=stderr, highlight=False, markup=False, emoji=False, width=width)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)
