"""What every ``kfed`` command shares: the manager-cluster options, the exit codes, one-line
errors, and running an async command body.

Exit codes: 0 ok; 1 the operation failed or timed out; 2 bad input or usage (click's own
usage errors are 2 as well); 3 a cluster cannot be reached (or refuses our credentials);
4 a drill saw a probe run on two clusters at once; 130 interrupted (Ctrl-C).

The conventions are kubectl's: ``-n/--namespace`` is always the namespace of the objects a
command reads (jobs, Workloads), defaulting to the kubeconfig context's namespace; kfed's own
namespace (where the workers' kubeconfig Secrets live) is ``--kfed-namespace``;
``-o/--output`` is only a format; durations are Go durations (``30s``, ``5m``, ``1h30m``).
Expected failures are raised as ``CliError`` (or a ``manager.kube.errors.KubeError``, mapped
here) and printed as one line on stderr, never as a traceback.
"""

from __future__ import annotations

import asyncio
import os
import re
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
EXIT_DOUBLE_RUN = 4
"""``kfed drill``: a probe ran on two clusters at once."""
EXIT_INTERRUPTED = 130

DEFAULT_NAMESPACE = "kueue-system"
"""kfed's own namespace on the manager (``--kfed-namespace``, $KFED_NAMESPACE)."""
DEFAULT_OBJECTS_NAMESPACE = "default"
"""The objects' namespace when the kubeconfig context names none (as kubectl)."""
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
    """kfed's namespace (``--kfed-namespace``): where the workers' kubeconfig Secrets live."""
    objects_namespace: str | None = None
    """``-n/--namespace`` given before the subcommand (None: not given)."""

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


ROW_FORMATS = ("table", "wide", "json", "yaml", "name")
"""``-o`` of the commands that print objects as rows (``workloads``, ``cluster list``)."""
TEXT_FORMATS = ("text", "json", "yaml")
"""``-o`` of the commands that print one explanation (``explain``, ``whatif``)."""


def output_option(*, rows: bool) -> Callable[[F], F]:
    """``-o/--output``, only ever a format (as kubectl's): ``table|wide|json|yaml|name`` for
    rows of objects, ``text|json|yaml`` for an explanation."""
    formats = ROW_FORMATS if rows else TEXT_FORMATS
    return click.option(
        "--output",
        "-o",
        type=click.Choice(formats, case_sensitive=False),
        default=formats[0],
        show_default=True,
        help="table (wide: more columns) for people, json or yaml (one object per row) for "
        "scripts, name (KIND/NAME, one per line) for pipes."
        if rows
        else "Text for people, or json or yaml for scripts.",
    )


def connection_options(
    *, namespace: bool = True, legacy_namespace: bool | None = None
) -> Callable[[F], F]:
    """``--kubeconfig``/``--context`` for the manager cluster (and, with ``namespace``,
    ``--kfed-namespace``: kfed's namespace there, where the workers' Secrets live). The
    command receives them as keyword arguments; ``target_of`` packs them. Each may also be
    given before the subcommand (``kfed --kubeconfig F workloads``): the subcommand's own
    value wins, then the group's, then the default.

    ``legacy_namespace`` (default: ``namespace``) also accepts, hidden and with a deprecation
    warning, the old ``--namespace`` for kfed's namespace, on commands where ``--namespace``
    names nothing else."""
    legacy = namespace if legacy_namespace is None else legacy_namespace

    def decorate(f: F) -> F:
        if legacy:
            f = _legacy_namespace_option(f)
        if namespace:
            f = _kfed_namespace_option(f)
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


def _kfed_namespace_option(f: F) -> F:
    return click.option(
        "--kfed-namespace",
        "kfed_namespace",
        default=None,
        envvar="KFED_NAMESPACE",
        metavar="NAMESPACE",
        help="kfed's own namespace on the manager: where the workers' kubeconfig Secrets live "
        f"(env KFED_NAMESPACE; default {DEFAULT_NAMESPACE}).",
    )(f)


_LEGACY_KEY = "kfed.legacy_namespace"


def _remember_legacy(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        warn(
            "--namespace for kfed's namespace is deprecated and goes away in the next "
            "release: use --kfed-namespace (or $KFED_NAMESPACE); -n/--namespace names the "
            "jobs' namespace"
        )
        ctx.meta[_LEGACY_KEY] = value


def _legacy_namespace_option(f: F) -> F:
    return click.option(
        "--namespace",
        "legacy_namespace",
        default=None,
        hidden=True,
        expose_value=False,
        callback=_remember_legacy,
        help="Deprecated: --kfed-namespace.",
    )(f)


def namespace_options(*, all_namespaces: bool) -> Callable[[F], F]:
    """``-n/--namespace``: the namespace of the objects (jobs, Workloads), default the
    kubeconfig context's namespace, else ``default``; with ``all_namespaces`` also
    ``-A/--all-namespaces``. The command receives ``namespace`` (and ``all_namespaces``);
    ``objects_namespace`` resolves them."""

    def decorate(f: F) -> F:
        if all_namespaces:
            f = click.option(
                "--all-namespaces",
                "-A",
                "all_namespaces",
                is_flag=True,
                help="Every namespace (adds a NAMESPACE column).",
            )(f)
        return objects_namespace_option(f)

    return decorate


def objects_namespace_option(f: F) -> F:
    return click.option(
        "--namespace",
        "-n",
        "namespace",
        default=None,
        metavar="NAMESPACE",
        help="Namespace of the jobs and Workloads, as in kubectl (default: the namespace of "
        "the kubeconfig's context, else default). Not kfed's namespace: --kfed-namespace.",
    )(f)


def remember_group_target(
    ctx: click.Context,
    kubeconfig: str | None,
    context: str | None,
    kfed_namespace: str | None,
    namespace: str | None = None,
) -> None:
    ctx.obj = Target(kubeconfig, context, kfed_namespace or DEFAULT_NAMESPACE, namespace)
    ctx.meta["kfed.group_kfed_namespace"] = kfed_namespace


def _group_target() -> Target:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    return root.obj if root is not None and isinstance(root.obj, Target) else Target()


def target_of(
    kubeconfig: str | None, context: str | None, kfed_namespace: str | None = None
) -> Target:
    """The manager and kfed's namespace: the subcommand's --kfed-namespace (a deprecated
    --namespace given on the command line beats only $KFED_NAMESPACE), then the group's;
    on a command without jobs, a group-level -n/--namespace still means kfed's namespace
    for one release (with a warning)."""
    group = _group_target()
    ctx = click.get_current_context(silent=True)
    legacy: str | None = ctx.meta.get(_LEGACY_KEY) if ctx is not None else None
    from_env = (
        ctx is not None
        and kfed_namespace is not None
        and ctx.get_parameter_source("kfed_namespace") == click.core.ParameterSource.ENVIRONMENT
    )
    namespace = (legacy or kfed_namespace) if from_env else (kfed_namespace or legacy)
    if namespace is None and ctx is not None and group.objects_namespace:
        legacy_ok = _LEGACY_PARAM in {p.name for p in ctx.command.params}
        if legacy_ok and ctx.meta.get("kfed.group_kfed_namespace") is None:
            warn(
                f"`kfed --namespace {group.objects_namespace} {ctx.info_name}` for kfed's "
                "namespace is deprecated and goes away in the next release: use "
                "--kfed-namespace (or $KFED_NAMESPACE)"
            )
            namespace = group.objects_namespace
    return Target(
        kubeconfig or group.kubeconfig,
        context or group.context,
        namespace or group.namespace,
        group.objects_namespace,
    )


_LEGACY_PARAM = "legacy_namespace"


def context_namespace(kubeconfig: str, context: str | None) -> str | None:
    """The namespace of a kubeconfig context (``context``, else the current-context), as
    kubectl reads it across a ``:``-separated list of files (the first file to set a value
    wins); None when there is none or the files cannot be read."""
    current: str | None = context
    contexts: dict[str, Any] = {}
    for path in _existing_paths(kubeconfig):
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        if current is None and config.get("current-context"):
            current = str(config["current-context"])
        for entry in config.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name") not in contexts:
                contexts[str(entry.get("name"))] = entry.get("context") or {}
    found = contexts.get(current or "")
    namespace = found.get("namespace") if isinstance(found, dict) else None
    return str(namespace) if namespace else None


def objects_namespace(
    target: Target, namespace: str | None, all_namespaces: bool = False
) -> str | None:
    """The namespace of the objects to read: None with -A; else -n (the subcommand's, then
    the group's), else the kubeconfig context's namespace, else ``default``."""
    if all_namespaces:
        return None
    return (
        namespace
        or target.objects_namespace
        or context_namespace(target.kubeconfig_path, target.context)
        or DEFAULT_OBJECTS_NAMESPACE
    )


def namespaced_name(
    target: Target, key: str, namespace: str | None, *, what: str = "[NAMESPACE/]NAME"
) -> tuple[str, str]:
    """The object a command's argument names: ``NAMESPACE/NAME``, or ``NAME`` in -n's
    namespace (default: the kubeconfig context's, as ``objects_namespace``). A -n that
    contradicts the argument's namespace is a usage error, never a silent choice."""
    if "/" not in key:
        if not key:
            raise usage_error(f"{key!r} is not {what} (for example light-job or team-a/light-job)")
        return str(objects_namespace(target, namespace)), key
    in_key, name = split_key(key, what=what)
    given = namespace or target.objects_namespace
    if given and given != in_key:
        raise usage_error(
            f"{key} names namespace {in_key}, but -n/--namespace says {given}: give one of them"
        )
    return in_key, name


# -- durations --------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``90s``, ``5m``, ``1h30m``, ``500ms``; also ``2d``; ``0``).
    A bare number is refused: its unit would be a guess."""
    value = text.strip()
    if value == "0":
        return 0.0
    if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", value):
        raise ValueError(f"{text!r} has no unit: write {value}s (Go durations: 30s, 5m, 1h30m)")
    if value.startswith("-"):
        raise ValueError(f"{text!r} is negative: a duration here is 0 or more")
    body = value.removeprefix("+")
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    return total


def format_duration(seconds: float) -> str:
    """A duration as a Go duration string (``1h30m``, ``45s``, ``500ms``), for defaults."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


class Duration(click.ParamType[float]):
    """A Go duration option (``30s``, ``5m``, ``1h30m``), converted to seconds (a float),
    within [``min``, ``max``] seconds. Bare numbers are refused with a hint."""

    name = "duration"

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min = min
        self.max = max

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)  # a default given in seconds
        else:
            try:
                seconds = parse_duration(str(value))
            except ValueError as err:
                self.fail(str(err), param, ctx)
        if self.min is not None and seconds < self.min:
            self.fail(f"{value!r} is under the minimum {format_duration(self.min)}", param, ctx)
        if self.max is not None and seconds > self.max:
            self.fail(f"{value!r} is over the maximum {format_duration(self.max)}", param, ctx)
        return seconds


def renamed_option(
    old: str, new: str, key: str
) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of a hidden, deprecated spelling of an option: warns and leaves the value
    for the new option's callback (``take_renamed``) under ``key``."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            warn(f"{old} is deprecated and goes away in the next release: use {new}")
            ctx.meta[key] = value

    return callback


def take_renamed(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """The callback of the new spelling: its own value, else the deprecated one's."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        return value if value is not None else ctx.meta.get(key)

    return callback


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
