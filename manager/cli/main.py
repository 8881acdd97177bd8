"""The ``kfed`` command: a thin click group; each subcommand lives in its own module."""

from __future__ import annotations

import click

from manager.cli import cluster, completion, crds, logs, submit, target, whatif, workloads
from manager.cli.drills import command as drills


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kfed")
@target.connection_options(legacy_namespace=False)  # also before the subcommand
@target.objects_namespace_option
@click.pass_context
def main(
    ctx: click.Context,
    kubeconfig: str | None,
    context: str | None,
    kfed_namespace: str | None,
    namespace: str | None,
) -> None:
    """kfed: federate GPU batch Jobs across Kubernetes clusters, the MultiKueue way.

    Every command that talks to a cluster takes --kubeconfig and --context for the MANAGER
    cluster, before or after the subcommand's name. As in kubectl: -n/--namespace is the
    namespace of the jobs and Workloads (default: the kubeconfig context's namespace), -A
    every namespace, -o a format (table, wide, json, yaml, name), -l a label selector;
    durations are Go durations (30s, 5m, 1h30m). kfed's own namespace, where the workers'
    kubeconfig Secrets live, is --kfed-namespace ($KFED_NAMESPACE). Exit codes: 0 ok,
    1 failed or timed out, 2 bad input or usage, 3 a cluster cannot be reached, 4 a drill
    saw a double run, 130 interrupted. Shell completion: kfed completion bash|zsh|fish.
    """
    target.remember_group_target(ctx, kubeconfig, context, kfed_namespace, namespace)


main.add_command(crds.command)
main.add_command(cluster.group)
main.add_command(submit.command)
main.add_command(workloads.workloads_command)
main.add_command(workloads.explain_command)
main.add_command(whatif.command)
main.add_command(drills.group)
main.add_command(logs.command)
main.add_command(completion.command)
