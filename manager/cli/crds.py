"""``kfed crds``: write the CRDs generated from manager/api, or check they are current."""

from __future__ import annotations

from pathlib import Path

import click

from manager.api import crdgen
from manager.cli.common import renamed_option, take_renamed

_OLD_OUTPUT = "kfed.crds.output"


@click.command("crds")
@click.option(
    "--output",
    "-o",
    "old_output",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    hidden=True,
    expose_value=False,
    callback=renamed_option("--output/-o", "--out-dir", _OLD_OUTPUT),
    help="Deprecated: --out-dir.",
)
@click.option(
    "--out-dir",
    "output",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    callback=take_renamed(_OLD_OUTPUT),
    metavar="DIR",
    help="Directory of the CRD YAML files, one per kind (default: crds).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 and list the files that differ from the generated CRDs.",
)
def command(output: Path | None, check: bool) -> None:
    """Generate the kueue.x-k8s.io/v1beta2 CRDs from kfed's API models."""
    output = output or Path("crds")
    if check:
        problems = crdgen.check_dir(output)
        for problem in problems:
            click.echo(problem, err=True)
        if problems:
            click.echo(f"run `kfed crds --out-dir {output}` to regenerate", err=True)
            raise SystemExit(1)
        click.echo(f"{output}: up to date")
        return
    changed = crdgen.write_dir(output)
    for path in changed:
        click.echo(f"wrote {path}" if path.exists() else f"removed {path}")
    if not changed:
        click.echo(f"{output}: up to date")
