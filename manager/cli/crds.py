"""``kfed crds``: write the CRDs generated from manager/api, or check they are current."""

from __future__ import annotations

from pathlib import Path

import click

from manager.api import crdgen


@click.command("crds")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("crds"),
    show_default=True,
    help="Directory of the CRD YAML files, one per kind.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 and list the files that differ from the generated CRDs.",
)
def command(output: Path, check: bool) -> None:
    """Generate the kueue.x-k8s.io/v1beta2 CRDs from kfed's API models."""
    if check:
        problems = crdgen.check_dir(output)
        for problem in problems:
            click.echo(problem, err=True)
        if problems:
            click.echo(f"run `kfed crds --output {output}` to regenerate", err=True)
            raise SystemExit(1)
        click.echo(f"{output}: up to date")
        return
    changed = crdgen.write_dir(output)
    for path in changed:
        click.echo(f"wrote {path}" if path.exists() else f"removed {path}")
    if not changed:
        click.echo(f"{output}: up to date")
