"""What every span of a workload's trace carries: its kind of job among them, so a trace of a
JobSet reads as a JobSet's."""

from __future__ import annotations

from typing import Any

from manager.controllers import spans


def test_a_workloads_spans_name_its_queue_and_the_kind_of_its_job() -> None:
    wl: dict[str, Any] = {
        "metadata": {
            "namespace": "ml-jobs",
            "name": "jobset-train-abcde",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "train",
                    "controller": True,
                }
            ],
        },
        "spec": {"queueName": "gpu-lq"},
        "status": {"admission": {"clusterQueue": "gpu-cq"}},
    }
    attributes = spans.workload_attributes("manager", wl)
    assert attributes["kfed.job.kind"] == "JobSet"
    assert attributes["kueue.workload"] == "jobset-train-abcde"
    assert (attributes["kueue.local_queue"], attributes["kueue.cluster_queue"]) == (
        "gpu-lq",
        "gpu-cq",
    )
    del wl["metadata"]["ownerReferences"]
    assert spans.workload_attributes("manager", wl)["kfed.job.kind"] is None, "left out"
