"""The typed views: an absent section reads as empty, a malformed one is a clear error."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manager.api.view import (
    EMPTY,
    MalformedObject,
    ObjectView,
    annotations_of,
    at,
    items,
    labels_of,
)
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET

JOB: dict[str, Any] = {
    "kind": "Job",
    "metadata": {
        "name": "sample",
        "namespace": "team",
        "uid": "u-1",
        "labels": {"a": "1"},
        "ownerReferences": [{"kind": "X", "name": "x"}],
    },
    "spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}},
    "status": {"conditions": [{"type": "Complete", "status": "True"}]},
}


@pytest.mark.parametrize("obj", [None, {}, {"spec": None}, {"spec": {}}, {"spec": ""}])
def test_an_absent_null_or_empty_section_reads_as_empty(obj: dict[str, Any] | None) -> None:
    assert at(obj, "spec") == {}
    assert at(obj, "spec", "template", "spec") == {}
    assert items(obj, "spec", "podSets") == ()


def test_the_empty_section_cannot_be_filled_in() -> None:
    with pytest.raises(TypeError):
        at({}, "spec")["x"] = 1  # type: ignore[index]
    assert EMPTY == {}


def test_a_present_section_is_the_objects_own() -> None:
    assert at(JOB, "spec", "template") is JOB["spec"]["template"]
    assert at(JOB, "spec", "template", "spec", "nodeSelector") == {"zone": "a"}
    assert items(JOB, "status", "conditions")[0]["type"] == "Complete"


def test_the_view_names_the_well_known_fields() -> None:
    view = ObjectView(JOB)
    assert (view.kind, view.name, view.namespace, view.uid) == ("Job", "sample", "team", "u-1")
    assert view.labels == {"a": "1"} == labels_of(JOB)
    assert view.annotations == {} == annotations_of(JOB)
    assert view.owner_references == [{"kind": "X", "name": "x"}]
    assert view.conditions == JOB["status"]["conditions"]
    assert ObjectView({}).name == ""


@pytest.mark.parametrize(
    ("obj", "path", "message"),
    [
        (
            {"kind": "Job", "metadata": {"name": "j", "namespace": "n"}, "spec": "x"},
            ("spec", "template"),
            "Job n/j: spec is not an object (got str)",
        ),
        (
            {"kind": "Job", "metadata": {"name": "j"}, "spec": {"template": ["a"]}},
            ("spec", "template"),
            "Job j: spec.template is not an object (got list)",
        ),
        (
            {"spec": {"podSets": {"a": 1}}},
            ("spec", "podSets"),
            "spec.podSets is not a list (got dict)",
        ),
    ],
)
def test_a_malformed_section_is_a_clear_error(
    obj: dict[str, Any], path: tuple[str, ...], message: str
) -> None:
    read = items if path[-1] == "podSets" else at
    with pytest.raises(MalformedObject, match=re.escape(message)) as err:
        read(obj, *path)
    assert isinstance(err.value, ValueError)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), json_values))
def test_any_json_object_reads_or_fails_with_malformed_object(obj: dict[str, Any]) -> None:
    for path in (("metadata", "labels"), ("spec",), ("status", "conditions")):
        try:
            at(obj, *path)
            items(obj, *path)
        except MalformedObject:
            pass


def test_a_job_kind_reading_a_malformed_job_says_which_field() -> None:
    # Before the views this was an AttributeError ("'str' object has no attribute 'get'");
    # the controllers' worker loop logs either and backs the key off.
    bad = {"kind": "JobSet", "metadata": {"name": "js", "namespace": "n"}, "spec": "oops"}
    with pytest.raises(MalformedObject, match=r"JobSet n/js: spec is not an object \(got str\)"):
        JOBSET.pod_sets(bad)
    with pytest.raises(MalformedObject, match="status is not an object"):
        BATCH_JOB.is_active({"metadata": {"name": "j"}, "status": ["x"]})
    assert BATCH_JOB.pod_sets({"metadata": {"name": "j"}, "spec": None})[0].template == {}
