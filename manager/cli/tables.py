"""Plain, kubectl-like tables (upper-case headers, no borders, one row per line) and the small
formatting rules they share: ages and quantities."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from manager.api import quantity


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, wrap: str = "") -> Table:
    """A borderless table; the column named ``wrap`` folds long text instead of truncating."""
    result = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for header in headers:
        if header == wrap:
            result.add_column(header.upper(), overflow="fold")
        else:
            result.add_column(header.upper(), no_wrap=True)
    for row in rows:
        result.add_row(*row)
    return result


def render_text(renderable: Any, *, width: int = 200) -> str:
    """What a renderable prints, as plain text (for tests and logs)."""
    console = Console(
        width=width,
        record=True,
        file=io.StringIO(),
        color_system=None,
        markup=False,
        emoji=False,
        highlight=False,
    )
    console.print(renderable)
    return console.export_text()


def print_json(console: Console, rows: Any) -> None:
    """Dataclasses (or lists of them) as JSON, for ``--output json``."""
    console.print_json(json.dumps(to_plain(rows)))


def print_yaml(rows: Any) -> None:
    """Dataclasses (or lists of them) as YAML, for ``--output yaml``."""
    click.echo(yaml.safe_dump(to_plain(rows), sort_keys=False, allow_unicode=True), nl=False)


def print_data(console: Console, output: str, rows: Any) -> bool:
    """``-o json`` or ``-o yaml``: print ``rows`` and return True; other formats: False."""
    if output == "json":
        print_json(console, rows)
        return True
    if output == "yaml":
        print_yaml(rows)
        return True
    return False


def print_names(names: Iterable[str]) -> None:
    """``--output name``: one ``kind.group/name`` a line, as kubectl prints them."""
    for name in names:
        click.echo(name)


def to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


def age(seconds: float) -> str:
    """A duration the way kubectl shows ages: 45s, 3m12s, 47m, 5h3m, 30h, 3d4h, 12d, 2y."""
    s = max(int(seconds), 0)
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def amount(resource: str, units: int) -> str:
    """Core units (milli-cpu, bytes, counts) in Kubernetes' canonical quantity form."""
    if units < 0:
        return "-" + quantity.from_core_units(resource, -units).canonical()
    return quantity.from_core_units(resource, units).canonical()
