"""Informers share equal keys and short strings between cached objects (``share_strings``):
the object is unchanged in value, the top-level dict is the very one the caller holds, and
two documents decoded apart end up holding the same string objects."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from manager.kube.informer import SHARED_STRING_MAX, share_strings

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=80),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=80), inner, max_size=4)
    ),
    max_leaves=30,
)

WORKLOAD = {
    "metadata": {"name": "job-a", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
    "spec": {
        "podSets": [
            {"template": {"spec": {"restartPolicy": "Never", "args": ["sleep", "x" * 100]}}}
        ]
    },
}


@given(JSON)
def test_a_value_is_unchanged_by_sharing(value: Any) -> None:
    assert share_strings(copy.deepcopy(value)) == value


@given(st.dictionaries(st.text(max_size=10), JSON, max_size=5))
def test_the_top_level_dict_is_refilled_in_place(value: dict[str, Any]) -> None:
    held = copy.deepcopy(value)
    assert share_strings(held) is held


def test_two_documents_decoded_apart_share_keys_and_short_strings_not_long_ones() -> None:
    text = json.dumps(WORKLOAD)
    first, second = share_strings(json.loads(text)), share_strings(json.loads(text))
    pod_spec_1 = first["spec"]["podSets"][0]["template"]["spec"]
    pod_spec_2 = second["spec"]["podSets"][0]["template"]["spec"]
    keys_1, keys_2 = list(pod_spec_1), list(pod_spec_2)
    assert all(a is b for a, b in zip(keys_1, keys_2, strict=True))
    assert pod_spec_1["restartPolicy"] is pod_spec_2["restartPolicy"]
    assert pod_spec_1["args"][0] is pod_spec_2["args"][0]  # in a list too
    queue = "kueue.x-k8s.io/queue-name"
    assert first["metadata"]["labels"][queue] is second["metadata"]["labels"][queue]
    long_1, long_2 = pod_spec_1["args"][1], pod_spec_2["args"][1]
    assert len(long_1) > SHARED_STRING_MAX and long_1 is not long_2
