"""Options shared by ``kfed`` commands: ``-o/--output`` (only ever a format, as kubectl's)
and the callbacks that keep a renamed option's old spelling working for a release."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from manager.cli.common import warn

F = TypeVar("F", bound=Callable[..., Any])

ROW_FORMATS = ("table", "wide", "json", "yaml", "name")
"""``-o`` of the commands that print objects as rows (``workloads``, ``cluster list``)."""
TEXT_FORMATS = ("text", "json", "yaml")
"""``-o`` of the commands that print one explanation (``explain``, ``whatif``)."""


def output_option(*, rows: bool) -> Callable[[F], F]:
    """``-o/--output``, only ever a format (as kubectl's): ``table|wide|json|yaml|name`` for
    rows of objects, ``text|json|yaml`` for an explanation."""
    formats = ROW_FORMATS if rows else TEXT_FORMATS
    return click.option(
        "--output",
        "-o",
        type=click.Choice(formats, case_sensitive=False),
        default=formats[0],
        show_default=True,
        help="table (wide: more columns) for people, json or yaml (one object per row) for "
        "scripts, name (KIND/NAME, one per line) for pipes."
        if rows
        else "Text for people, or json or yaml for scripts.",
    )


def renamed_option(
    old: str, new: str, key: str
) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of a hidden, deprecated spelling of an option: warns and leaves the value
    for the new option's callback (``take_renamed``) under ``key``."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            warn(f"{old} is deprecated and goes away in the next release: use {new}")
            ctx.meta[key] = value

    return callback


def take_renamed(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """The callback of the new spelling: its own value, else the deprecated one's."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        return value if value is not None else ctx.meta.get(key)

    return callback
