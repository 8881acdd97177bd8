"""An object of the name kfed is about to create is already on the worker
(``samename.judge``): never adopted, changed or deleted unless this manager made it for this
very workload."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api import constants as C
from manager.federation.decisions.samename import SameName, judge

ORIGIN = "multikueue"


def obj(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ml", "labels": labels}}


OURS = {C.MULTIKUEUE_ORIGIN_LABEL: ORIGIN}


@pytest.mark.parametrize(
    ("existing", "workload_name", "expected"),
    [
        (None, "job-train-1", SameName.NONE),
        (obj(**OURS, **{C.PREBUILT_WORKLOAD_LABEL: "job-train-1"}), "job-train-1", SameName.OURS),
        (
            obj(**OURS, **{C.PREBUILT_WORKLOAD_LABEL: "job-train-0"}),
            "job-train-1",
            SameName.EARLIER,
        ),
        (obj(**OURS), "job-train-1", SameName.EARLIER),
        (obj(), "job-train-1", SameName.FOREIGN),
        (obj(**{C.MULTIKUEUE_ORIGIN_LABEL: "other-manager"}), "job-train-1", SameName.FOREIGN),
        (obj(**OURS), None, SameName.OURS),  # a copy of the Workload itself
        (obj(team="someone-else"), None, SameName.FOREIGN),
    ],
    ids=[
        "nothing there",
        "ours, for this workload",
        "ours, for an earlier workload of the name",
        "ours, for no workload",
        "someone else's",
        "another manager's",
        "our copy of the Workload",
        "a Workload someone else made",
    ],
)
def test_whose_is_the_object_of_that_name(
    existing: dict[str, Any] | None, workload_name: str | None, expected: SameName
) -> None:
    assert judge(existing, origin=ORIGIN, workload_name=workload_name) is expected
