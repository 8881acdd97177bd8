"""``kfed crds``: write the CRDs generated from manager/api, check they are current, or apply
them to a cluster after checking that no served or stored version of the installed CRDs (an
upstream Kueue's, say) would be lost."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from manager.api import crdgen
from manager.api.kinds import KUEUE_KINDS
from manager.cli.common import CliError, console, run
from manager.cli.kubeconfigs import connect
from manager.cli.options import renamed_option, take_renamed
from manager.cli.target import Target, connection_options, target_of
from manager.kube import errors
from manager.kube.resources import CRDS

_OLD_OUTPUT = "kfed.crds.output"
FIELD_MANAGER = "kfed-crds"
ADVICE = (
    "Keep the installed CRDs: where they serve v1beta2, kfed speaks it; install kfed without "
    "its CRDs (Helm: the kfed chart alone, not kfed-crds; kustomize: skip deploy/crds). "
    'docs/install.md, "Beside upstream Kueue", says more.'
)


def served(crd: Mapping[str, Any]) -> list[str]:
    return [v["name"] for v in crd.get("spec", {}).get("versions", []) if v.get("served")]


def version_losses(
    installed: Mapping[str, Any], replacement: Mapping[str, Any], *, allow_served: bool = False
) -> list[str]:
    """What replacing ``installed`` by ``replacement`` would lose, one sentence each: a
    version in its status.storedVersions that the replacement does not serve (its objects
    would be unreadable), and, unless ``allow_served``, a version it serves that the
    replacement does not (its clients would break)."""
    name = installed.get("metadata", {}).get("name", "?")
    keeps = served(replacement)
    problems = []
    stored = installed.get("status", {}).get("storedVersions") or []
    lost = [v for v in stored if v not in keeps]
    if lost:
        problems.append(
            f"{name}: objects are stored as {', '.join(lost)} (status.storedVersions), which "
            f"kfed's CRD does not serve (it serves {', '.join(keeps)}): they would be "
            "unreadable; rewrite them as a served version and drop "
            f"{', '.join(lost)} from status.storedVersions first"
        )
    dropped = [v for v in served(installed) if v not in keeps and v not in lost]
    if dropped and not allow_served:
        problems.append(
            f"{name}: the installed CRD serves {', '.join(dropped)}, which kfed's does not "
            f"(it serves {', '.join(keeps)}): every client of {', '.join(dropped)} would "
            "break; once none is left, --allow-dropping-served-versions replaces it anyway"
        )
    return problems


async def _apply(target: Target, *, check_only: bool, allow_served: bool) -> None:
    out = console()
    api = await connect(target.kubeconfig_path, target.context, name="cluster")
    try:
        wanted = [crdgen.crd(kind) for kind in KUEUE_KINDS]
        problems = []
        for crd in wanted:
            try:
                installed = await api.get(CRDS, crd["metadata"]["name"])
            except errors.NotFound:
                continue
            problems += version_losses(installed, crd, allow_served=allow_served)
        if problems:
            raise CliError(
                "kfed's CRDs would replace installed ones and lose versions; nothing applied:\n  "
                + "\n  ".join(problems)
                + f"\n{ADVICE}"
            )
        if check_only:
            out.print(f"{len(wanted)} CRDs: none would lose a served or stored version")
            return
        for crd in wanted:
            name = crd["metadata"]["name"]
            await api.patch(CRDS, name, crd, kind="apply", field_manager=FIELD_MANAGER, force=True)
            out.print(f"applied {name}")
    finally:
        await api.close()


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
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Install the CRDs on the cluster of --kubeconfig/--context (server-side apply), "
    "unless that would lose a version the installed CRDs serve or stored: then apply "
    "nothing, exit 1 and say what to do.",
)
@click.option(
    "--check-cluster",
    is_flag=True,
    help="As --apply, but only check: exit 1 when applying would lose a version.",
)
@click.option(
    "--allow-dropping-served-versions",
    is_flag=True,
    help="With --apply: replace CRDs even where that stops serving a version (never a stored one).",
)
@connection_options(namespace=False)
def command(
    output: Path | None,
    check: bool,
    apply_: bool,
    check_cluster: bool,
    allow_dropping_served_versions: bool,
    kubeconfig: str | None,
    context: str | None,
) -> None:
    """Generate the kueue.x-k8s.io/v1beta2 CRDs from kfed's API models, or install them."""
    if sum([check, apply_, check_cluster]) > 1:
        raise click.UsageError("--check, --apply and --check-cluster exclude each other")
    if apply_ or check_cluster:
        if output is not None:
            raise click.UsageError("--out-dir writes files: not with --apply/--check-cluster")
        run(
            _apply(
                target_of(kubeconfig, context),
                check_only=check_cluster,
                allow_served=allow_dropping_served_versions,
            ),
            where="the cluster",
        )
        return
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
