"""Resolve a workload's priority the way Kueue does, so controllers hand the core one int."""

from __future__ import annotations


def resolve_priority(
    *,
    workload_priority_class_value: int | None = None,
    pod_priority_class_value: int | None = None,
) -> int:
    """WorkloadPriorityClass value, else the pod PriorityClass value, else 0.

    A WorkloadPriorityClass wins because it exists precisely to give queueing a priority
    that differs from the pods' scheduling priority.
    """
    if workload_priority_class_value is not None:
        return workload_priority_class_value
    if pod_priority_class_value is not None:
        return pod_priority_class_value
    return 0
