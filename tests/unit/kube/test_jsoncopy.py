"""``copy_json``: a deep copy of decoded JSON, equal and independent of the original."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from manager.kube.jsoncopy import copy_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


def containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value``, itself included."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


@given(JSON)
def test_a_copy_is_equal_and_shares_no_container_with_the_original(value: Any) -> None:
    copied = copy_json(value)
    assert copied == value
    originals = {id(c) for c in containers(value)}
    assert not originals & {id(c) for c in containers(copied)}


def test_changing_the_copy_leaves_the_original_as_it_was() -> None:
    original = {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    before = copy.deepcopy(original)
    copied = copy_json(original)
    copied["status"]["conditions"][0]["status"] = "False"
    copied["status"]["conditions"].append({"type": "Finished"})
    assert original == before


def test_other_values_are_deep_copied_too() -> None:
    class Marker:
        def __init__(self) -> None:
            self.seen: list[str] = []

    original: dict[str, Any] = {"marker": Marker(), "pair": (1, [2])}
    copied = copy_json(original)
    assert copied["marker"] is not original["marker"]
    assert copied["pair"] == (1, [2]) and copied["pair"][1] is not original["pair"][1]
