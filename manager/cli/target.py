"""Which manager cluster a ``kfed`` command talks to, and which namespaces it means: the
``--kubeconfig``/``--context``/``--kfed-namespace`` and ``-n``/``-A`` options, given before
or after the subcommand, packed into a ``Target``.

The conventions are kubectl's: ``-n/--namespace`` is always the namespace of the objects a
command reads (jobs, Workloads), defaulting to the kubeconfig context's namespace; kfed's own
namespace (where the workers' kubeconfig Secrets live) is ``--kfed-namespace``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from manager.cli.common import split_key, usage_error, warn
from manager.cli.kubeconfigs import connect, context_namespace
from manager.kube.api import KubeApi

DEFAULT_NAMESPACE = "kueue-system"
"""kfed's own namespace on the manager (``--kfed-namespace``, $KFED_NAMESPACE)."""
DEFAULT_OBJECTS_NAMESPACE = "default"
"""The objects' namespace when the kubeconfig context names none (as kubectl)."""

F = TypeVar("F", bound=Callable[..., Any])


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


async def connect_manager(target: Target) -> KubeApi:
    return await connect(target.kubeconfig_path, target.context, name="manager")


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
