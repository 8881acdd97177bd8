"""How long a worker's shim lets a copy run without hearing from its manager
(worker_shim.fencing.fence_after): the manager's word on the copy, never less than the
lease's own duration."""

from __future__ import annotations

import pytest

from manager.federation.settings import FENCE_AFTER_ANNOTATION
from worker_shim.fencing import fence_after


def copy(annotations: dict[str, str] | None) -> dict[str, object]:
    return {"metadata": {"name": "w", "annotations": annotations}}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, 10.0),  # a copy from before the annotation existed: the lease duration
        ({FENCE_AFTER_ANNOTATION: "300"}, 300.0),  # at-most-once: the outage timeout
        ({FENCE_AFTER_ANNOTATION: "10"}, 10.0),  # fast: the lease duration
        ({FENCE_AFTER_ANNOTATION: "3"}, 10.0),  # never sooner than the lease expires
        ({FENCE_AFTER_ANNOTATION: "soon"}, 10.0),  # unreadable: the lease duration
    ],
)
def test_fence_after(annotations: dict[str, str] | None, expected: float) -> None:
    assert fence_after(copy(annotations), 10.0) == expected
