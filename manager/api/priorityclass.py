"""WorkloadPriorityClass: a named priority for workloads, independent of pod priority."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import KubeObject, PrinterColumn, ResourceInfo
from manager.api.schema import Int32


class WorkloadPriorityClass(KubeObject):
    """A priority value that Jobs select with the ``kueue.x-k8s.io/priority-class`` label.

    It orders queues and decides preemption, without changing the pods' own priority.
    """

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="WorkloadPriorityClass",
        plural="workloadpriorityclasses",
        singular="workloadpriorityclass",
        scope="Cluster",
        short_names=("wpc",),
        printer_columns=(
            PrinterColumn("Value", ".value", "integer", "The priority value"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    value: Int32
    """The priority: higher values are admitted first and may preempt lower ones."""
    description: Annotated[str, Field(max_length=2048)] | None = None
    """What the priority is for, for people."""
