"""A typed view of ``batch/v1`` Job: the fields the Job integration reads and writes.

The Job integration suspends and unsuspends Jobs, injects the admitted flavor's node
selector and tolerations into the pod template, sets ``managedBy`` on the manager, and
reads completion from the status. Everything else in a Job is kept untouched
(``extra="allow"``), so a Job read, changed and written back loses nothing.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from manager.api.meta import (
    ConditionStatus,
    KubeModel,
    KubeObject,
    LabelSelector,
    ResourceInfo,
    Time,
)
from manager.api.pod import PodTemplateSpec
from manager.api.schema import Int32, Int64


class JobSpec(KubeModel):
    """The parts of a Job's spec that admission and federation act on."""

    template: PodTemplateSpec
    """The pods' template; admission injects node selectors and tolerations here."""
    parallelism: Int32 | None = None
    """How many pods run at once: the pod count of the Job's single pod set."""
    completions: Int32 | None = None
    completion_mode: str | None = None
    suspend: bool | None = None
    """A queued Job is created suspended; admission unsuspends it."""
    managed_by: str | None = None
    """``kueue.x-k8s.io/multikueue`` on the manager, so no pods run there."""
    backoff_limit: Int32 | None = None
    active_deadline_seconds: Int64 | None = None
    ttl_seconds_after_finished: Int32 | None = None
    selector: LabelSelector | None = None


class JobCondition(KubeModel):
    """A Job condition (``Complete``, ``Failed``, ``Suspended``, ``SuccessCriteriaMet``...).

    Not a ``metav1.Condition``: reason, message and times may be missing.
    """

    type: str
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_probe_time: Time | None = None
    last_transition_time: Time | None = None


class JobStatus(KubeModel):
    """A Job's progress, copied from the worker to the manager's Job."""

    conditions: list[JobCondition] = Field(default_factory=list)
    start_time: Time | None = None
    completion_time: Time | None = None
    active: Int32 | None = None
    ready: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    terminating: Int32 | None = None


class Job(KubeObject):
    """A ``batch/v1`` Job."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group="batch",
        version="v1",
        kind="Job",
        plural="jobs",
        singular="job",
        scope="Namespaced",
    )

    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    spec: JobSpec
    status: JobStatus | None = None
