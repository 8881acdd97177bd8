"""The ``kfed`` command: a thin click group; each subcommand lives in its own module."""

from __future__ import annotations

import click

from manager.cli import cluster, common, crds, logs, submit, whatif, workloads
from manager.cli.drills import command as drills


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kfed")
@common.connection_options()  # also before the subcommand
@click.pass_context
def main(
    ctx: click.Context, kubeconfig: str | None, context: str | None, namespace: str | None
) -> None:
    """kfed: federate GPU batch Jobs across Kubernetes clusters, the MultiKueue way.

    Every command that talks to a cluster takes --kubeconfig and --context for the MANAGER
    cluster, before or after the subcommand's name. Exit codes: 0 ok, 1 failed or timed out,
    2 bad input or usage, 3 a cluster cannot be reached.
    """
    common.remember_group_target(ctx, kubeconfig, context, namespace)


main.add_command(crds.command)
main.add_command(cluster.group)
main.add_command(submit.command)
main.add_command(workloads.workloads_command)
main.add_command(workloads.explain_command)
main.add_command(whatif.command)
main.add_command(drills.group)
main.add_command(logs.command)
