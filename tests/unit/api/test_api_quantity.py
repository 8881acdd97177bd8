"""Quantities parse exactly as Kubernetes parses them and convert to the core's units."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from manager.api.quantity import (
    Quantity,
    QuantityError,
    QuantityFormat,
    format_quantity,
    from_core_units,
    parse_quantity,
    to_core_units,
)

NANO = 10**9

# input, canonical form, cpu core units (milli), other core units (whole, rounded up)
TABLE: list[tuple[str | int, str, int, int]] = [
    ("0", "0", 0, 0),
    ("0.0", "0", 0, 0),
    ("1", "1", 1000, 1),
    (32, "32", 32000, 32),
    ("2", "2", 2000, 2),
    ("1.0", "1", 1000, 1),
    ("1.5", "1500m", 1500, 2),
    (".5", "500m", 500, 1),
    ("5.", "5", 5000, 5),
    ("+3k", "3k", 3_000_000, 3000),
    ("500m", "500m", 500, 1),
    ("1m", "1m", 1, 1),
    ("0.5m", "500u", 1, 1),
    ("0.1n", "1n", 1, 1),
    ("1u", "1u", 1, 1),
    ("250n", "250n", 1, 1),
    ("1.000000001", "1000000001n", 1001, 2),
    ("3M", "3M", 3_000_000_000, 3_000_000),
    ("2G", "2G", 2_000_000_000_000, 2_000_000_000),
    ("1T", "1T", 10**15, 10**12),
    ("1P", "1P", 10**18, 10**15),
    ("1E", "1E", 10**21, 10**18),
    ("1000E", "1000E", 10**24, 10**21),
    ("1Ki", "1Ki", 1024_000, 1024),
    ("128Gi", "128Gi", 128 * 2**30 * 1000, 128 * 2**30),
    ("512Gi", "512Gi", 512 * 2**30 * 1000, 512 * 2**30),
    ("1.5Gi", "1536Mi", 1536 * 2**20 * 1000, 1536 * 2**20),
    ("0.5Gi", "512Mi", 512 * 2**20 * 1000, 512 * 2**20),
    ("0.5Ki", "512", 512_000, 512),
    ("1536", "1536", 1_536_000, 1536),
    ("1Ti", "1Ti", 2**40 * 1000, 2**40),
    ("1Pi", "1Pi", 2**50 * 1000, 2**50),
    ("1Ei", "1Ei", 2**60 * 1000, 2**60),
    ("2000Ei", str(2**63 - 1), (2**63 - 1) * 1000, 2**63 - 1),  # Kubernetes caps BinarySI
    ("1e3", "1e3", 1_000_000, 1000),
    ("1E3", "1e3", 1_000_000, 1000),
    ("1.5e3", "1500", 1_500_000, 1500),
    ("1e-3", "1e-3", 1, 1),
    ("5e-1", "500e-3", 500, 1),
    ("12e6", "12e6", 12 * 10**9, 12 * 10**6),
    ("-1.5", "-1500m", -1500, -2),
]


@pytest.mark.parametrize(("raw", "canonical", "cpu", "other"), TABLE)
def test_parse_and_convert(raw: str | int, canonical: str, cpu: int, other: int) -> None:
    quantity = parse_quantity(raw)
    assert quantity.canonical() == canonical
    assert to_core_units("cpu", quantity) == cpu
    assert to_core_units("nvidia.com/gpu", quantity) == other
    assert to_core_units("memory", raw) == other
    assert parse_quantity(canonical) == quantity
    assert quantity.to_wire() == raw


@pytest.mark.parametrize(
    "raw",
    [
        "",
        ".",
        "+",
        "1e",
        "1 ",
        " 1",
        "abc",
        "1.2.3",
        "1KiB",
        "1k5",
        "Gi",
        "1ki",
        "1K",
        "--1",
        "1e1001",
        "1e+",
    ],
)
def test_malformed_strings_are_rejected(raw: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


@pytest.mark.parametrize("raw", [1.5, True, None, [1]])
def test_non_quantity_values_are_rejected(raw: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)  # type: ignore[arg-type]


def test_formats_follow_the_suffix() -> None:
    assert parse_quantity("1Gi").format is QuantityFormat.BINARY_SI
    assert parse_quantity("1G").format is QuantityFormat.DECIMAL_SI
    assert parse_quantity("1e9").format is QuantityFormat.DECIMAL_EXPONENT
    assert parse_quantity(7).format is QuantityFormat.DECIMAL_SI


def test_from_core_units_writes_what_kueue_writes() -> None:
    assert from_core_units("cpu", 1500).canonical() == "1500m"
    assert from_core_units("cpu", 2000).canonical() == "2"
    assert from_core_units("memory", 128 * 2**30).canonical() == "128Gi"
    assert from_core_units("memory", 1000).canonical() == "1k"
    assert from_core_units("hugepages-2Mi", 2**21).canonical() == "2Mi"
    assert from_core_units("nvidia.com/gpu", 4).canonical() == "4"
    assert from_core_units("nvidia.com/gpu", 4).to_wire() == "4"


def test_format_quantity() -> None:
    assert format_quantity(Decimal("0.25")) == "250m"
    assert format_quantity(3 * 2**30, QuantityFormat.BINARY_SI) == "3Gi"
    assert format_quantity(Decimal("1E-12")) == "1n"  # rounded up, never to zero


def test_quantities_compare_by_value_and_add_up() -> None:
    assert parse_quantity("1Gi") == parse_quantity(2**30)
    assert parse_quantity("1000m") == parse_quantity(1)
    assert parse_quantity("999m") < parse_quantity("1")
    assert len({parse_quantity("1k"), parse_quantity("1e3"), parse_quantity(1000)}) == 1
    assert (parse_quantity("1.5") + parse_quantity("500m")).canonical() == "2"
    assert (parse_quantity("1Gi") - parse_quantity("512Mi")).canonical() == "512Mi"
    assert parse_quantity("1.5").value == Decimal("1.5")
    assert not Quantity.ZERO


class _Holder(BaseModel):
    quantity: Quantity


def test_pydantic_fields_keep_the_wire_form() -> None:
    assert _Holder.model_validate({"quantity": 32}).model_dump(mode="json") == {"quantity": 32}
    assert _Holder.model_validate({"quantity": "0.5"}).model_dump(mode="json") == {
        "quantity": "0.5"
    }
    made = _Holder(quantity=from_core_units("cpu", 250))
    assert made.model_dump(mode="json") == {"quantity": "250m"}
    with pytest.raises(ValidationError, match="not a quantity"):
        _Holder.model_validate({"quantity": "12GB"})
    with pytest.raises(ValidationError, match="not a quantity"):
        _Holder.model_validate({"quantity": 0.5})


# --- properties, against an independent oracle built on Fraction ------------------------

_DECIMAL_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_DECIMAL_SUFFIX["E"] = 18
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@st.composite
def quantity_strings(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A quantity string and its exact value."""
    whole = draw(st.integers(min_value=0, max_value=10**7))
    frac = draw(st.one_of(st.none(), st.text(alphabet="0123456789", max_size=12)))
    number = str(whole) if frac is None else f"{whole}.{frac}"
    value = Fraction(number if not number.endswith(".") else number[:-1])
    kind = draw(st.sampled_from(["decimal", "binary", "exponent"]))
    if kind == "decimal":
        suffix = draw(st.sampled_from(sorted(_DECIMAL_SUFFIX)))
        return number + suffix, value * Fraction(10) ** _DECIMAL_SUFFIX[suffix]
    if kind == "binary":
        suffix = draw(st.sampled_from(sorted(_BINARY_SUFFIX)))
        return number + suffix, value * 2 ** _BINARY_SUFFIX[suffix]
    exponent = draw(st.integers(min_value=-15, max_value=15))
    return f"{number}e{exponent}", value * Fraction(10) ** exponent


def _ceil(value: Fraction) -> int:
    return math.ceil(value)


@given(quantity_strings())
def test_parsing_is_exact_to_the_nano(sample: tuple[str, Fraction]) -> None:
    text, value = sample
    expected = _ceil(value * NANO)
    if text.endswith("i"):  # Kubernetes caps binary quantities at int64
        expected = min(expected, (2**63 - 1) * NANO)
    assert parse_quantity(text).nanos == expected


@given(quantity_strings())
def test_core_units_round_up_like_kubernetes(sample: tuple[str, Fraction]) -> None:
    text, _ = sample
    nanos = parse_quantity(text).nanos
    assert to_core_units("cpu", text) == _ceil(Fraction(nanos, NANO // 1000))
    assert to_core_units("nvidia.com/gpu", text) == _ceil(Fraction(nanos, NANO))


@given(quantity_strings())
def test_canonical_form_round_trips(sample: tuple[str, Fraction]) -> None:
    quantity = parse_quantity(sample[0])
    canonical = quantity.canonical()
    again = parse_quantity(canonical)
    assert again == quantity
    assert again.canonical() == canonical


@given(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]), st.integers(0, 10**15))
def test_core_units_survive_the_trip_through_a_status(resource: str, units: int) -> None:
    written = from_core_units(resource, units).to_wire()
    assert to_core_units(resource, written) == units
