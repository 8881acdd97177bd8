"""Stopping a fenced job's pods: deleted with a short grace, a pod already being deleted with
a longer one deleted again to shorten it, and a pod that finished never touched."""

from __future__ import annotations

from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

STOP_ATTEMPTS = 3


async def stop_pods(api: KubeApi, namespace: str, selector: str, grace_seconds: int) -> int:
    """Delete a job's pods (``selector``) that still run (or wait to); returns how many. A
    pod already being deleted with a longer grace (its Job controller's, once the Job was
    suspended) is deleted again with ``grace_seconds``, which shortens it.

    A pod that finished is never touched: its result may not be counted yet (the Job
    controller counts a pod by its tracking finalizer, which a deleted pod can lose first, as
    kwok's does), and a fence that erased a run which had already succeeded would make the
    manager run the job again. Each delete holds the version it judged, so a pod that
    finishes between the read and the delete is judged again rather than deleted."""
    pods = await api.list(R.PODS, namespace, label_selector=selector)
    stopped = 0
    for pod in pods.get("items") or []:
        for _ in range(STOP_ATTEMPTS):
            meta = pod["metadata"]
            deleting = bool(meta.get("deletionTimestamp"))
            grace = meta.get("deletionGracePeriodSeconds")
            if pod_finished(pod) or (deleting and (grace is None or grace <= grace_seconds)):
                break
            try:
                await api.delete(
                    R.PODS,
                    meta["name"],
                    namespace,
                    uid=meta.get("uid"),
                    resource_version=meta.get("resourceVersion"),
                    grace_period_seconds=grace_seconds,
                )
                stopped += 1
                break
            except errors.NotFound:
                break
            except errors.Conflict:
                pass  # it changed since it was read: judge it again
            try:
                pod = await api.get(R.PODS, meta["name"], namespace)
            except errors.NotFound:
                break
    return stopped


def pod_finished(pod: dict[str, object]) -> bool:
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")
