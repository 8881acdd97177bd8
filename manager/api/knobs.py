"""A setting declared once: its default and meaning on the settings dataclass, and from that
one declaration its command-line flag, the flag's help, and its key in Kueue's
``Configuration`` where the meaning is the same.

    lease_duration: float = knob(10.0, "--worker-lease-duration", "seconds ...")

``add_flags`` adds every declared flag to an ``argparse`` parser (type and choices from the
field's type, a ``--x/--no-x`` switch for a bool, the default from the field); ``from_flags``
builds the dataclass from the parsed arguments. A field without ``knob`` has no flag (set by
the code that builds the settings).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
_KNOB = "kfed.knob"


@dataclass(frozen=True, slots=True)
class Knob:
    flag: str
    help: str
    aliases: tuple[str, ...] = ()
    """Older names of the flag, still accepted."""
    config: str | None = None
    """Its key in Kueue's Configuration (``multiKueue.gcInterval``), where the meaning is the
    same."""
    parse: Callable[[str], Any] | None = None
    """Reads the flag's text (default: the field's type)."""
    metavar: str | None = None


def knob(
    default: Any,
    flag: str,
    help: str,
    *,
    aliases: tuple[str, ...] = (),
    config: str | None = None,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
) -> Any:
    """A dataclass field with ``default`` whose flag, help and Configuration key are these."""
    return dataclasses.field(
        default=default,
        metadata={_KNOB: Knob(flag, help, aliases, config, parse, metavar)},
    )


def knobs(cls: type) -> list[tuple[dataclasses.Field[Any], Knob, Any]]:
    """(field, its knob, its resolved type) of every declared setting of ``cls``."""
    hints = typing.get_type_hints(cls)
    return [
        (f, f.metadata[_KNOB], hints[f.name])
        for f in dataclasses.fields(cls)
        if _KNOB in f.metadata
    ]


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per declared setting of ``cls``, its default the field's."""
    for f, k, kind in knobs(cls):
        options: dict[str, Any] = {"dest": f.name, "default": f.default, "help": k.help}
        if k.metavar:
            options["metavar"] = k.metavar
        if k.parse is not None:
            options["type"] = k.parse
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            options["type"] = kind
            options["choices"] = list(kind)
            options["metavar"] = "{" + ",".join(str(m.value) for m in kind) + "}"
        elif kind is bool:
            # a switch both ways (--x / --no-x): a default of True must still be turnable off,
            # and the config file's ``x: true|false`` reads as one
            options["action"] = argparse.BooleanOptionalAction
        elif kind in (int, float, str):
            options["type"] = kind
        if k.config:
            options["help"] = f"{k.help} (Kueue's {k.config})"
        parser.add_argument(k.flag, *k.aliases, **options)


def from_flags(cls: type[T], args: argparse.Namespace, **others: Any) -> T:
    """``cls`` from the parsed flags of its declared settings, plus ``others``."""
    values = {f.name: getattr(args, f.name) for f, _, _ in knobs(cls)}
    return cls(**values, **others)
