"""``kfed workloads`` and ``kfed explain``: where every workload is, and why."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.console import Group
from rich.markup import escape
from rich.text import Text

from manager.cli import positions, workloadinfo
from manager.cli.common import console, run
from manager.cli.options import output_option
from manager.cli.tables import print_data, print_names, table, to_plain
from manager.cli.target import (
    Target,
    connect_manager,
    connection_options,
    namespace_options,
    namespaced_name,
    objects_namespace,
    objects_namespace_option,
    target_of,
)
from manager.kube import resources as R

Obj = dict[str, Any]

# -- workloads -------------------------------------------------------------------------------


async def _workloads(
    target: Target,
    namespace: str | None,
    output: str,
    visibility_url: str | None,
    selector: str | None = None,
    states: tuple[str, ...] = (),
) -> None:
    async with await connect_manager(target) as api:
        items = await workloadinfo.list_workload_objects(api, namespace, selector)
        now = time.time()
        pairs = [
            (row, wl)
            for row, wl in zip(
                workloadinfo.workload_rows(items, now=now), _sorted(items), strict=True
            )
            if workloadinfo.state_matches(row, states)
        ]
        rows = [row for row, _ in pairs]
        found = positions.Positions()
        if output not in ("name",) and any(r.state == "Pending" for r in rows):
            queues = [q["metadata"]["name"] for q in (await api.list(R.CLUSTER_QUEUES))["items"]]
            found = await positions.read_positions(api, queues, direct_url=visibility_url)
    out = console()
    place = {
        f"{r.namespace}/{r.name}": found.by_workload.get(f"{r.namespace}/{r.name}") for r in rows
    }
    data = [
        {
            **to_plain(r),
            "positionInClusterQueue": None if p is None else p[0],
            "positionInLocalQueue": None if p is None else p[1],
        }
        for r, p in zip(rows, place.values(), strict=True)
    ]
    if print_data(out, output, data):
        return
    if output == "name":
        print_names(f"workload.kueue.x-k8s.io/{r.name}" for r in rows)
        return
    if not rows:
        where = f"in namespace {namespace}" if namespace else "in any namespace"
        out.print(f"no workloads {where}")
        return
    wide = output == "wide"
    headers = ("kind", "queue", "flavor", "cluster", "state", "position", "age")
    extra = ("clusterqueue", "priority", "job") if wide else ()
    out.print(
        table(
            ("name", *headers, *extra) if namespace else ("namespace", "name", *headers, *extra),
            (
                (
                    *(() if namespace else (r.namespace,)),
                    r.name,
                    r.kind,
                    r.queue,
                    r.flavors,
                    r.cluster,
                    r.state,
                    positions.describe(place[f"{r.namespace}/{r.name}"]),
                    r.age,
                    *(workloadinfo.wide_columns(wl) if wide else ()),
                )
                for r, wl in pairs
            ),
        )
    )
    if found.unavailable:
        out.print(f"positions not shown: {found.unavailable}", style="dim")


def _sorted(items: list[Obj]) -> list[Obj]:
    """In the order of workload_rows."""
    return sorted(items, key=lambda w: (w["metadata"]["namespace"], w["metadata"]["name"]))


@click.command("workloads")
@namespace_options(all_namespaces=True)
@click.option(
    "--selector",
    "-l",
    default=None,
    metavar="SELECTOR",
    help="Only Workloads with these labels, as in kubectl (e.g. -l team=ml,tier!=batch); "
    "the API server filters.",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(workloadinfo.STATES, case_sensitive=False),
    help="Only workloads in this state (repeatable; running = admitted).",
)
@click.option(
    "--visibility-url",
    envvar="KFED_VISIBILITY_URL",
    metavar="URL",
    help="Read positions from this manager server (e.g. http://127.0.0.1:8080 through a "
    "port-forward) instead of through the API server's visibility.kueue.x-k8s.io APIService.",
)
@output_option(rows=True)
@connection_options(namespace=False)
def workloads_command(
    all_namespaces: bool,
    namespace: str | None,
    selector: str | None,
    states: tuple[str, ...],
    visibility_url: str | None,
    output: str,
    kubeconfig: str | None,
    context: str | None,
) -> None:
    """One view of the manager's workloads across the federation.

    Columns: QUEUE (LocalQueue), FLAVOR (flavors of the admission), CLUSTER (the worker it
    runs on, status.clusterName, or the one it was sent to, marked "(nominated)"), STATE
    (Pending: waiting for quota; Reserved: quota held, waiting for a worker to admit it;
    Admitted: admitted and placed; Finished; Evicted: lost its admission and requeued),
    POSITION (a pending workload's place in line in its ClusterQueue, and in its LocalQueue,
    from Kueue's visibility API), AGE; -o wide adds CLUSTERQUEUE, PRIORITY and JOB.

    \b
    Examples:
      kfed workloads -A --state pending
      kfed workloads -n ml-jobs -l team=vision -o name
    """
    target = target_of(kubeconfig, context)
    run(
        _workloads(
            target,
            objects_namespace(target, namespace, all_namespaces),
            output.lower(),
            visibility_url,
            selector,
            states,
        )
    )


# -- explain ---------------------------------------------------------------------------------


def render_explanation(e: workloadinfo.Explanation) -> Group:
    def field(label: str, value: str) -> Text:
        line = Text(f"{label + ':' if label else '':<13}", style="bold")
        line.append(value)
        return line

    parts: list[Text] = [
        Text.from_markup(f"[bold]Workload {escape(e.workload)}[/]")
        + Text(f" ({e.kind or 'Job'} {e.job})" if e.job else ""),
        field("State", e.state),
        field("Why", e.summary),
        field(
            "Queue", e.queue + (f" -> ClusterQueue {e.cluster_queue}" if e.cluster_queue else "")
        ),
    ]
    if e.cluster:
        parts.append(field("Cluster", e.cluster))
    if e.result:
        parts.append(field("Result", e.result))
    for index, line in enumerate(e.assignments):
        parts.append(field("Flavors" if index == 0 else "", line))
    for index, line in enumerate(e.topology):
        parts.append(field("Topology" if index == 0 else "", line))
    for index, line in enumerate(e.checks):
        parts.append(field("Checks" if index == 0 else "", line))
    if e.decision is not None:
        d = e.decision
        parts.append(Text("Placement decision (kfed.io/placement):", style="bold"))
        parts.append(field("  Chosen", d.cluster + (f" at {d.at}" if d.at else "")))
        parts.append(field("  Reason", d.reason))
        if d.rule:
            parts.append(field("  Rule", d.rule))
        parts.append(Text("  Candidates:", style="bold"))
        for candidate in d.candidates:
            name = candidate.split(":", 1)[0]
            marker = "->" if name == d.cluster else "  "
            parts.append(Text(f"   {marker} {candidate}"))
    for index, line in enumerate(e.conditions):
        parts.append(field("Conditions" if index == 0 else "", line))
    for note in e.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


async def _explain(target: Target, key: str, namespace: str | None, output: str) -> None:
    namespace, name = namespaced_name(target, key, namespace)
    async with await connect_manager(target) as api:
        workload, job = await workloadinfo.resolve(api, namespace, name)
        if job is None:
            job = await workloadinfo.owner_job(api, workload)
    explanation = workloadinfo.explain(workload, job)
    out = console()
    if not print_data(out, output.lower(), explanation):
        out.print(render_explanation(explanation))


@click.command("explain")
@click.argument("key", metavar="[NAMESPACE/]NAME")
@objects_namespace_option
@output_option(rows=False)
@connection_options(namespace=False)
def explain_command(
    key: str, namespace: str | None, output: str, kubeconfig: str | None, context: str | None
) -> None:
    """Why a workload is pending, or why it runs where it runs.

    NAME is a Workload or a Job on the manager (a Job is resolved to its Workload), in
    -n/--namespace (default: the kubeconfig context's namespace, else default), or
    NAMESPACE/NAME.
    For a pending workload: the queue's reason (QuotaReserved=False message) or the admission
    check's message. For a placed one: the recorded dispatch decision (annotation
    kfed.io/placement): the chosen cluster, the reason, the scoring rule and every
    candidate's verdict. For a finished one: the worker it ran on and how its job ended
    (Complete, Failed), also once its objects on the worker are collected. Exit 1 when
    neither exists.

    \b
    Examples:
      kfed explain ml-jobs/heavy-job
      kfed explain heavy-job -n ml-jobs
    """
    run(_explain(target_of(kubeconfig, context), key, namespace, output))
