"""``kfed cluster``: register, list, remove, put into maintenance and rotate the credentials
of worker clusters."""

from __future__ import annotations

import asyncio

import click

from manager.api import constants as C
from manager.cli import clusterstatus, registration, rotation, workerobjects
from manager.cli.common import CliError, console, from_kube_error, read_text, run, warn
from manager.cli.durations import Duration
from manager.cli.options import output_option
from manager.cli.rollback import Rollback, rollback_summary
from manager.cli.tables import print_data, print_names, table
from manager.cli.target import Target, connect_manager, connection_options, target_of
from manager.federation.workers import kubeconfig
from manager.kube import errors


@click.group("cluster")
def group() -> None:
    """Register worker clusters with the manager and manage them.

    A worker is a Secret holding its kubeconfig (in kfed's --kfed-namespace), a MultiKueueCluster
    pointing at that Secret, and an entry in a MultiKueueConfig. The kfed manager connects to
    every registered worker and reports the connection as the MultiKueueCluster's Active
    condition.
    """


# -- add -----------------------------------------------------------------------------------


async def _roll_back(name: str, rollback: Rollback, *, waited: bool) -> str:
    undone, failed = await rollback.run()
    summary = rollback_summary(name, undone, failed)
    if waited and undone and not failed:
        summary += " (--no-wait registers it without waiting for the manager)"
    return summary


async def _add(
    target: Target,
    name: str,
    kubeconfig_file: str,
    worker_context: str | None,
    config: str,
    wait: bool,
    timeout: float,
) -> None:
    workerobjects.check_name(name)
    checked = workerobjects.check_worker_kubeconfig(
        read_text(kubeconfig_file), context=worker_context, source=kubeconfig_file
    )
    out, err = console(), console(stderr=True)
    api = await connect_manager(target)
    rollback = Rollback()
    waited = False
    try:
        try:
            for line in await registration.register(
                api, name, checked, namespace=target.namespace, config=config, rollback=rollback
            ):
                (err if line.startswith("note:") else out).print(line)
            if wait:
                waited = True
                with err.status(f"waiting for {name} to become Active…") as status:
                    condition = await clusterstatus.wait_active(
                        api,
                        name,
                        timeout=timeout,
                        on_update=lambda text: status.update(f"waiting for {name}: {text}"),
                    )
                shown = clusterstatus.shown_message(condition) or condition.get("reason")
                out.print(f"{name} is Active: {shown}")
        except (CliError, errors.KubeError) as problem:
            # Refused (not Active in time) or failed midway: leave nothing of this add behind.
            failure = problem if isinstance(problem, CliError) else from_kube_error(problem)
            summary = await _roll_back(name, rollback, waited=waited)
            raise CliError(f"{failure.message}; {summary}", failure.code) from None
        except asyncio.CancelledError:  # Ctrl-C
            err.print(await _roll_back(name, rollback, waited=waited))
            raise
    finally:
        await api.close()
    try:
        rows = await clusterstatus.worker_capacity(name, checked)
    except CliError as problem:
        warn(f"capacity of {name} not shown: {problem.message}")
        return
    if not rows:
        out.print(f"{name} has no ClusterQueues yet: it has no capacity to offer")
        return
    out.print(f"capacity of {name} ({kubeconfig.redact_server(checked.server)}):")
    out.print(
        table(
            ("clusterqueue", "flavor", "resource", "nominal", "reserved", "free"),
            ((r.cluster_queue, r.flavor, r.resource, r.nominal, r.reserved, r.free) for r in rows),
        )
    )


@group.command("add")
@click.argument("name")
@click.option(
    "--kubeconfig-file",
    "kubeconfig_file",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The WORKER's kubeconfig ('-' for stdin). It must be self-contained: inline CA and "
    "credentials, no exec plugins, no file paths, no insecure-skip-tls-verify.",
)
@click.option(
    "--worker-context",
    default=None,
    help="Context to use from the worker's kubeconfig (default: its current-context). Only "
    "that context is stored.",
)
@click.option(
    "--config",
    default=registration.DEFAULT_CONFIG,
    show_default=True,
    help="MultiKueueConfig to add the worker to (created if missing).",
)
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until the manager reports the worker Active.",
)
@click.option(
    "--timeout",
    type=Duration(min=0),
    default="60s",
    show_default=True,
    help="How long to wait for Active (a Go duration: 30s, 5m).",
)
@connection_options()
def add(
    name: str,
    kubeconfig_file: str,
    worker_context: str | None,
    config: str,
    wait: bool,
    timeout: float,
    kubeconfig: str | None,
    context: str | None,
    kfed_namespace: str | None,
) -> None:
    """Register worker cluster NAME from its kubeconfig.

    Validates the worker's kubeconfig exactly as the manager will (refusing unsafe ones,
    exit 2, before anything is created), stores it reduced to one context in Secret NAME,
    creates or updates MultiKueueCluster NAME, adds NAME to the MultiKueueConfig, waits until
    the manager reports it Active (exit 1 with the condition's reason on timeout) and prints
    the worker's capacity per ClusterQueue, flavor and resource, read from the worker itself.

    When the worker is not Active in time, or a step fails, it undoes what it did: deletes
    what it created, puts back what it changed (a Secret or MultiKueueCluster NAME that was
    there before is restored, never deleted), and says so.

    --kubeconfig/--context always name the MANAGER cluster; the worker's are
    --kubeconfig-file/--worker-context.

    \b
    Example:
      kfed cluster add worker-1 --kubeconfig-file worker-1.kubeconfig
    """
    run(
        _add(
            target_of(kubeconfig, context, kfed_namespace),
            name,
            kubeconfig_file,
            worker_context,
            config,
            wait,
            timeout,
        )
    )


# -- list ------------------------------------------------------------------------------------


async def _list(target: Target, output: str) -> None:
    async with await connect_manager(target) as api:
        rows = await clusterstatus.list_clusters(api)
    out = console()
    if print_data(out, output, rows):
        return
    if output == "name":
        print_names(f"multikueuecluster.kueue.x-k8s.io/{r.name}" for r in rows)
        return
    if not rows:
        out.print("no worker clusters registered (see `kfed cluster add --help`)")
        return
    out.print(
        table(
            ("name", "active", "reason", "maintenance", "configs", "message"),
            ((r.name, r.active, r.reason, r.maintenance, r.configs, r.message) for r in rows),
            wrap="message",
        )
    )


@group.command("list")
@output_option(rows=True)
@connection_options()
def list_(
    output: str, kubeconfig: str | None, context: str | None, kfed_namespace: str | None
) -> None:
    """List registered worker clusters: whether the manager is connected to each (Active, its
    reason and message), its maintenance state and the MultiKueueConfigs listing it (-o wide
    has the same columns; -o name prints multikueuecluster.kueue.x-k8s.io/NAME)."""
    run(_list(target_of(kubeconfig, context, kfed_namespace), output))


# -- remove ----------------------------------------------------------------------------------


async def _remove(target: Target, name: str) -> None:
    async with await connect_manager(target) as api:
        done = await registration.unregister(api, name, namespace=target.namespace)
    out, err = console(), console(stderr=True)
    for line in done:
        (err if line.startswith("note:") else out).print(line)


@group.command("remove")
@click.argument("name")
@connection_options()
def remove(
    name: str, kubeconfig: str | None, context: str | None, kfed_namespace: str | None
) -> None:
    """Unregister worker cluster NAME: take it out of every MultiKueueConfig (deleting a
    config it was the last member of), then delete its MultiKueueCluster and its Secret.

    Workloads still running there are no longer followed by the manager: drain the worker
    first (`kfed cluster drain NAME`) and wait until `kfed workloads -A` shows none there.
    Exit 1 when no such worker exists.
    """
    run(_remove(target_of(kubeconfig, context, kfed_namespace), name))


# -- maintenance -----------------------------------------------------------------------------


async def _maintain(target: Target, name: str, mode: str | None, done: str) -> None:
    async with await connect_manager(target) as api:
        await registration.set_maintenance(api, name, mode)
    console().print(f"{name} {done}")


@group.command("cordon")
@click.argument("name")
@connection_options()
def cordon(
    name: str, kubeconfig: str | None, context: str | None, kfed_namespace: str | None
) -> None:
    """Stop placing new workloads on worker NAME.

    Sets the annotation kfed.io/maintenance=cordon on MultiKueueCluster NAME. Workloads
    already there keep running; the manager dispatches new ones to other workers. Undo with
    `kfed cluster uncordon NAME`.
    """
    run(
        _maintain(
            target_of(kubeconfig, context, kfed_namespace),
            name,
            C.MAINTENANCE_CORDON,
            "cordoned: no new workloads will be placed there",
        )
    )


@group.command("drain")
@click.argument("name")
@connection_options()
def drain(
    name: str, kubeconfig: str | None, context: str | None, kfed_namespace: str | None
) -> None:
    """Move every workload off worker NAME and place nothing new there.

    Sets the annotation kfed.io/maintenance=drain on MultiKueueCluster NAME. Like cordon, and
    the manager also evicts the workloads running there and re-dispatches them to other
    workers (they restart there). Undo with `kfed cluster uncordon NAME`.
    """
    run(
        _maintain(
            target_of(kubeconfig, context, kfed_namespace),
            name,
            C.MAINTENANCE_DRAIN,
            "draining: its workloads move to other workers, nothing new is placed there",
        )
    )


@group.command("uncordon")
@click.argument("name")
@connection_options()
def uncordon(
    name: str, kubeconfig: str | None, context: str | None, kfed_namespace: str | None
) -> None:
    """End maintenance of worker NAME: remove the kfed.io/maintenance annotation, so the
    manager places workloads there again."""
    run(
        _maintain(
            target_of(kubeconfig, context, kfed_namespace),
            name,
            None,
            "uncordoned: new workloads may be placed there again",
        )
    )


# -- credentials ------------------------------------------------------------------------------


async def _rotate(
    target: Target,
    name: str,
    seconds: int,
    service_account: str | None,
    worker_kubeconfig: str | None,
) -> None:
    async with await connect_manager(target) as api:
        done = await rotation.rotate(
            api,
            name,
            namespace=target.namespace,
            seconds=seconds,
            service_account=service_account,
            worker_kubeconfig=worker_kubeconfig,
        )
    namespace, account = done.service_account
    until = done.expires.strftime("%Y-%m-%dT%H:%M:%SZ") if done.expires else "unknown"
    console().print(
        f"{name}: new token for ServiceAccount {namespace}/{account}, valid until {until}, "
        f"in Secret {target.namespace}/{done.secret}; the manager reconnects with it"
    )


@group.command("rotate")
@click.argument("name")
@click.option(
    "--duration",
    type=Duration(min=0),
    default="24h",
    show_default=True,
    help="How long the new token is valid (a Go duration: 90m, 24h, 48h; 2d too; at least 10m).",
)
@click.option(
    "--service-account",
    metavar="NAMESPACE/NAME",
    help="The worker's ServiceAccount to mint for (default: the one the current token names).",
)
@click.option(
    "--worker-kubeconfig",
    metavar="PATH",
    help="Reach the worker with this kubeconfig instead of the current credentials (when "
    "they have already expired).",
)
@connection_options()
def rotate(
    name: str,
    duration: float,
    service_account: str | None,
    worker_kubeconfig: str | None,
    kubeconfig: str | None,
    context: str | None,
    kfed_namespace: str | None,
) -> None:
    """Mint a fresh ServiceAccount token for worker NAME and put it into its kubeconfig
    Secret, without restarting anything.

    A TokenRequest on the worker (with the current token, which must still be valid, or with
    --worker-kubeconfig) for the ServiceAccount the current token was issued for; only the
    token in the Secret changes. The manager warns ahead of expiry: the MultiKueueCluster's
    kfed.io/CredentialsExpiring condition, an Event, the dashboard, and the metric
    kfed_cluster_credentials_expiry_timestamp_seconds.
    """
    other = read_text(worker_kubeconfig) if worker_kubeconfig else None
    run(
        _rotate(
            target_of(kubeconfig, context, kfed_namespace),
            name,
            int(duration),
            service_account,
            other,
        ),
        where="the manager or the worker cluster",
    )
