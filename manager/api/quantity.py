"""Kubernetes resource quantities ("500m", "128Gi", 32, "1e3"), parsed exactly.

A quantity is held as an integer number of nano-units, which is exactly the precision
Kubernetes keeps (``resource.Quantity`` rounds anything finer *up* to 1n, so that
asking for a tiny amount never becomes zero). The admission core works in plain
integers, so ``to_core_units`` converts the way Kubernetes' ``MilliValue()`` (for cpu)
and ``Value()`` (for everything else) do: rounding up.

On the wire a quantity keeps the form it was written in (``32`` stays the integer 32,
``"0.5"`` stays ``"0.5"``), so objects written by others round-trip unchanged; quantities
made here are written in Kubernetes' canonical form (``canonical()``).

This module depends on the standard library and pydantic only: the admission core
imports it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from functools import total_ordering
from typing import Any, ClassVar

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import CoreSchema, core_schema

NANO = 10**9
"""Nano-units per unit: the finest precision a Kubernetes quantity keeps."""

MAX_EXPONENT = 1000
"""Largest decimal exponent accepted ("1e1000"); larger ones cannot be meaningful quotas."""

_INT64_MAX = 2**63 - 1

_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)

QUANTITY_PATTERN = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"  # an unsigned decimal number
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"  # a binary, decimal or exponent suffix
)
"""The CRD pattern for the (non-negative) quantities kfed's API holds."""

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_BINARY_SUFFIXES = {"": 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_SHIFT = {shift: suffix for suffix, shift in _BINARY_SUFFIXES.items()}

# Resources that Kueue (pkg/resources) writes back in binary form; everything else,
# cpu included, is written in decimal form.
_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_HUGEPAGES_PREFIX = "hugepages-"


class QuantityError(ValueError):
    """A string or number that is not a Kubernetes quantity."""


class QuantityFormat(StrEnum):
    """How a quantity is written: it decides the canonical string, as in Kubernetes."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


def _divide_away_from_zero(numerator: int, denominator: int) -> int:
    """Integer division rounding away from zero, like Kubernetes' ``inf.RoundUp``."""
    magnitude = -(-abs(numerator) // denominator)
    return magnitude if numerator >= 0 else -magnitude


@total_ordering
class Quantity:
    """An exact Kubernetes quantity: compares by value, remembers its wire form."""

    __slots__ = ("_format", "_nanos", "_wire")

    _format: QuantityFormat
    _nanos: int
    _wire: str | int | None

    ZERO: ClassVar[Quantity]

    def __init__(
        self,
        nanos: int,
        format: QuantityFormat = QuantityFormat.DECIMAL_SI,
        *,
        wire: str | int | None = None,  # None: write the canonical form
    ) -> None:
        self._nanos = nanos
        self._format = format
        self._wire = wire

    # --- construction -------------------------------------------------------------------

    @classmethod
    def parse(cls, raw: str | int | Decimal | Quantity) -> Quantity:
        """Parse a wire value: a quantity string, an integer, or a Decimal."""
        if isinstance(raw, Quantity):
            return raw
        if isinstance(raw, bool):
            raise QuantityError(f"{raw!r} is a boolean, not a quantity")
        if isinstance(raw, int):
            return cls(raw * NANO, QuantityFormat.DECIMAL_SI, wire=raw)
        if isinstance(raw, Decimal):
            if not raw.is_finite():
                raise QuantityError(f"{raw} is not a finite quantity")
            return cls.from_decimal(raw)
        if isinstance(raw, str):
            return cls._parse_string(raw)
        raise QuantityError(f"{raw!r} is not a quantity: use a string such as '1.5' or '500m'")

    @classmethod
    def from_decimal(
        cls, value: Decimal | int, format: QuantityFormat = QuantityFormat.DECIMAL_SI
    ) -> Quantity:
        """A quantity of ``value`` units, rounded up to nano precision."""
        sign, digits, exponent = Decimal(value).as_tuple()
        if not isinstance(exponent, int):
            raise QuantityError(f"{value} is not a finite quantity")
        mantissa = int("".join(map(str, digits)) or "0")
        nanos = _scale(mantissa, decimal_exponent=exponent, binary_shift=0)
        return cls(-nanos if sign else nanos, format)

    @classmethod
    def _parse_string(cls, text: str) -> Quantity:
        match = _QUANTITY_RE.fullmatch(text)
        if match is None or not (match["whole"] or match["frac"]):
            raise QuantityError(f"{text!r} is not a quantity (e.g. 500m, 2, 1.5, 128Gi, 1e3)")
        whole, frac, suffix = match["whole"], match["frac"] or "", match["suffix"] or ""
        mantissa = int(whole + frac or "0")
        decimal_exponent, binary_shift = -len(frac), 0
        if suffix in _DECIMAL_SUFFIXES:  # includes no suffix at all
            fmt = QuantityFormat.DECIMAL_SI
            decimal_exponent += _DECIMAL_SUFFIXES[suffix]
        elif suffix in _BINARY_SUFFIXES:
            fmt, binary_shift = QuantityFormat.BINARY_SI, _BINARY_SUFFIXES[suffix]
        else:
            exponent = int(suffix[1:])
            if abs(exponent) > MAX_EXPONENT:
                raise QuantityError(f"{text!r}: exponent beyond ±{MAX_EXPONENT}")
            fmt, decimal_exponent = QuantityFormat.DECIMAL_EXPONENT, decimal_exponent + exponent
        nanos = _scale(mantissa, decimal_exponent=decimal_exponent, binary_shift=binary_shift)
        if fmt is QuantityFormat.BINARY_SI:
            # Kubernetes caps binary quantities at int64 and shows fractions of one
            # in decimal form ("0.5Gi" is "512Mi", but "0.5Ki" is "512").
            nanos = min(nanos, _INT64_MAX * NANO)
            if 0 < nanos < NANO:
                fmt = QuantityFormat.DECIMAL_SI
        return cls(-nanos if match["sign"] == "-" else nanos, fmt, wire=text)

    # --- values -------------------------------------------------------------------------

    @property
    def nanos(self) -> int:
        """The exact value in nano-units."""
        return self._nanos

    @property
    def format(self) -> QuantityFormat:
        return self._format

    @property
    def value(self) -> Decimal:
        """The exact value in units, without trailing zeros."""
        whole, frac = divmod(abs(self._nanos), NANO)
        text = f"{whole}.{frac:09d}".rstrip("0").rstrip(".")
        return Decimal(("-" if self._nanos < 0 else "") + text)

    def milli_value(self) -> int:
        """Milli-units rounded up, like Kubernetes' ``MilliValue()``."""
        return _divide_away_from_zero(self._nanos, NANO // 1000)

    def int_value(self) -> int:
        """Units rounded up, like Kubernetes' ``Value()``."""
        return _divide_away_from_zero(self._nanos, NANO)

    def canonical(self) -> str:
        """The string Kubernetes would print for this quantity (``Quantity.String()``)."""
        return _canonical(self._nanos, self._format)

    def to_wire(self) -> str | int:
        """The value to write into an object: as it was read, or canonical."""
        return self._wire if self._wire is not None else self.canonical()

    # --- arithmetic and comparison --------------------------------------------------------

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self._nanos + other._nanos, self._format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self._nanos - other._nanos, self._format)

    def __neg__(self) -> Quantity:
        return Quantity(-self._nanos, self._format)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: Quantity) -> bool:
        return self._nanos < other._nanos

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __bool__(self) -> bool:
        return self._nanos != 0

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.to_wire()!r})"

    # --- pydantic -------------------------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_field,
            serialization=core_schema.plain_serializer_function_ser_schema(
                _serialize_field, when_used="always"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        # Structural CRD schemas express "int or string" with this flag instead of anyOf.
        return {"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN, "minimum": 0}


Quantity.ZERO = Quantity(0)


def _scale(mantissa: int, *, decimal_exponent: int, binary_shift: int) -> int:
    """``mantissa * 10**decimal_exponent * 2**binary_shift`` in nanos, rounded up."""
    numerator = mantissa << binary_shift
    shift = decimal_exponent + 9
    if shift >= 0:
        return numerator * int(10**shift)
    return _divide_away_from_zero(numerator, int(10**-shift))


def _canonical(nanos: int, fmt: QuantityFormat) -> str:
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt is QuantityFormat.BINARY_SI and magnitude >= 1024 * NANO and magnitude % NANO == 0:
        units, shift = magnitude // NANO, 0
        while units % 1024 == 0 and shift < 60:
            units, shift = units // 1024, shift + 10
        return f"{sign}{units}{_BINARY_BY_SHIFT[shift]}"
    # Decimal forms: an integer mantissa times a power of ten that is a multiple of 3.
    mantissa, exponent = magnitude, -9
    top = 18 if fmt is not QuantityFormat.DECIMAL_EXPONENT else None
    while mantissa % 1000 == 0 and (top is None or exponent < top):
        mantissa, exponent = mantissa // 1000, exponent + 3
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def _validate_field(raw: object) -> Quantity:
    if not isinstance(raw, str | int | Decimal | Quantity):
        raise QuantityError(f"{raw!r} is not a quantity: use a string such as '1.5' or '500m'")
    quantity = Quantity.parse(raw)
    if quantity.nanos < 0:
        raise QuantityError(f"{raw!r}: quantities in kfed's API must not be negative")
    return quantity


def _serialize_field(quantity: Quantity) -> str | int:
    return quantity.to_wire()


def parse_quantity(raw: str | int | Decimal | Quantity) -> Quantity:
    """Parse a Kubernetes quantity; raises ``QuantityError`` when it is not one."""
    return Quantity.parse(raw)


def format_quantity(
    value: Decimal | int, format: QuantityFormat = QuantityFormat.DECIMAL_SI
) -> str:
    """The canonical Kubernetes string for ``value`` units in the given format."""
    return Quantity.from_decimal(value, format).canonical()


def to_core_units(resource_name: str, quantity: Quantity | str | int) -> int:
    """The integer the admission core counts in: milli-cpu for ``cpu``, units otherwise.

    Both round up, like Kubernetes' ``MilliValue()`` and ``Value()``: 0.1 GPU counts as
    one GPU, 0.5m cpu as 1m.
    """
    parsed = Quantity.parse(quantity)
    return parsed.milli_value() if resource_name == "cpu" else parsed.int_value()


def from_core_units(resource_name: str, units: int) -> Quantity:
    """The quantity for core units, in the form Kueue writes it into statuses.

    cpu is milli-units in decimal form ("1500m"); memory, storage and hugepages are bytes
    in binary form ("128Gi"); anything else (GPUs, pods) is plain decimal.
    """
    if resource_name == "cpu":
        return Quantity(units * (NANO // 1000), QuantityFormat.DECIMAL_SI)
    if resource_name in _BINARY_RESOURCES or resource_name.startswith(_HUGEPAGES_PREFIX):
        return Quantity(units * NANO, QuantityFormat.BINARY_SI)
    return Quantity(units * NANO, QuantityFormat.DECIMAL_SI)
