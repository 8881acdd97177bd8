"""The ``kfed`` command: a thin click group; each subcommand lives in its own module."""

from __future__ import annotations

import click

from manager.cli import crds


@click.group()
@click.version_option(package_name="kfed")
def main() -> None:
    """kfed: federate GPU batch Jobs across Kubernetes clusters, the MultiKueue way."""


main.add_command(crds.command)
