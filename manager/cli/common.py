"""What every ``kfed`` command shares: the manager-cluster options, the exit codes, one-line
errors, and running an async command body.

Exit codes: 0 ok; 1 the operation failed or timed out; 2 bad input or usage (click's own
usage errors are 2 as well); 3 a cluster cannot be reached (or refuses our credentials).
Expected failures are raised as ``CliError`` (or a ``manager.kube.errors.KubeError``, mapped
here) and printed as one line on stderr, never as a traceback.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import yaml
from rich.console import Console

from manager.kube import errors
from manager.kube.api import KubeApi

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

DEFAULT_NAMESPACE = "kueue-system"
REQUEST_TIMEOUT = 10.0
"""Seconds per API request: a person is waiting."""

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """An expected failure: one line for the user (what, where, what to do) and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def usage_error(message: str) -> CliError:
    return CliError(message, EXIT_USAGE)


# -- the manager cluster --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """How to reach the manager cluster, and the namespace of kfed's Secrets there."""

    kubeconfig: str | None = None
    """A kubeconfig path (or a ``:``-separated list, like $KUBECONFIG); None: the default."""
    context: str | None = None
    namespace: str = DEFAULT_NAMESPACE

    @property
    def kubeconfig_path(self) -> str:
        return self.kubeconfig or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config"))

    def describe(self) -> str:
        context = f", context {self.context}" if self.context else ""
        return f"kubeconfig {self.kubeconfig_path}{context}"


def _existing_paths(value: str) -> list[Path]:
    return [
        Path(p).expanduser() for p in value.split(os.pathsep) if p and Path(p).expanduser().exists()
    ]


async def connect(
    kubeconfig: str, context: str | None, *, name: str, flag_hint: str = "--kubeconfig/--context"
) -> KubeApi:
    """A KubeApi for a kubeconfig file; a missing or broken file is a usage error (exit 2)."""
    paths = _existing_paths(kubeconfig)
    if not paths:
        raise usage_error(f"kubeconfig {kubeconfig} not found: pass {flag_hint} or set $KUBECONFIG")
    try:
        api = await KubeApi.from_kubeconfig_file(
            os.pathsep.join(str(p) for p in paths), context=context, name=name
        )
    except Exception as err:  # kubernetes_asyncio raises ConfigException, TypeError, ...
        where = f"{kubeconfig}" + (f" (context {context})" if context else "")
        raise usage_error(
            f"cannot load kubeconfig {where}: {_first_line(err)}; check {flag_hint}"
        ) from None
    api.request_timeout = REQUEST_TIMEOUT
    host = getattr(api.client.configuration, "host", "")
    api.name = f"{name} {host}".strip()
    return api


async def connect_dict(config: dict[str, Any], context: str, *, name: str) -> KubeApi:
    """A KubeApi for an in-memory (already validated) kubeconfig, e.g. a worker's."""
    try:
        api = await KubeApi.from_kubeconfig_dict(config, context=context, name=name)
    except Exception as err:
        raise CliError(f"{name}: its kubeconfig cannot be loaded: {_first_line(err)}") from None
    api.request_timeout = REQUEST_TIMEOUT
    host = getattr(api.client.configuration, "host", "")
    api.name = f"{name} {host}".strip()
    return api


async def connect_manager(target: Target) -> KubeApi:
    return await connect(target.kubeconfig_path, target.context, name="manager")


def output_option(*, rows: bool) -> Callable[[F], F]:
    """``--output/-o``: ``table`` (``rows``) or ``text`` for people, ``json`` for scripts."""
    human = "table" if rows else "text"
    return click.option(
        "--output",
        "-o",
        type=click.Choice([human, "json"]),
        default=human,
        show_default=True,
        help="A table for people, or JSON (one object per row) for scripts."
        if rows
        else "Text for people, or JSON for scripts.",
    )


def connection_options(*, namespace: bool = True) -> Callable[[F], F]:
    """``--kubeconfig``/``--context`` for the manager cluster (and ``--namespace``, kfed's
    namespace there). The command receives them as keyword arguments; ``target_of`` packs
    them. Each may also be given before the subcommand (``kfed --kubeconfig F workloads``):
    the subcommand's own value wins, then the group's, then the default."""

    def decorate(f: F) -> F:
        if namespace:
            f = _namespace_option(f)
        f = _context_option(f)
        return _kubeconfig_option(f)

    return decorate


def _kubeconfig_option(f: F) -> F:
    return click.option(
        "--kubeconfig",
        default=None,
        metavar="PATH",
        help="Kubeconfig of the MANAGER cluster (default: $KUBECONFIG, else ~/.kube/config).",
    )(f)


def _context_option(f: F) -> F:
    return click.option(
        "--context",
        default=None,
        help="Context of the manager cluster in the kubeconfig (default: its current-context).",
    )(f)


def _namespace_option(f: F) -> F:
    return click.option(
        "--namespace",
        default=None,
        envvar="KFED_NAMESPACE",
        help="kfed's namespace on the manager: where the workers' kubeconfig Secrets live "
        f"(env KFED_NAMESPACE; default {DEFAULT_NAMESPACE}).",
    )(f)


def remember_group_target(
    ctx: click.Context, kubeconfig: str | None, context: str | None, namespace: str | None
) -> None:
    ctx.obj = Target(kubeconfig, context, namespace or DEFAULT_NAMESPACE)


def _group_target() -> Target:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    return root.obj if root is not None and isinstance(root.obj, Target) else Target()


def target_of(kubeconfig: str | None, context: str | None, namespace: str | None = None) -> Target:
    group = _group_target()
    return Target(
        kubeconfig or group.kubeconfig,
        context or group.context,
        namespace or group.namespace,
    )


# -- errors -----------------------------------------------------------------------------------


def _first_line(err: BaseException) -> str:
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
        sys.exit(130)


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
        raise usage_error(f"{source} is not valid YAML: {_first_line(err)}") from None


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
