"""Flavors one place can hold together, and workloads left to a check controller.

Issue "Never stuck, never a wrong result", items 1 and 5, on the pure core:

- a distributed job whose launcher asks for cpu only, beside H100 trainers, is given flavors
  that one worker offers together (``ClusterQueue.colocated_flavors``), not the ClusterQueue's
  first flavor for the launcher and H100 for the trainers, which no worker could hold;
- a workload whose job is left to MultiKueue (``spec.managedBy``) is never admitted in a
  ClusterQueue without a MultiKueue check (``Workload.left_to_check``): nothing would run it.
"""

from __future__ import annotations

import dataclasses

from manager.core import AdmissionCore, ClusterQueueName, FlavorName, PendingKind, Workload

from .builders import admitted_keys, key, make_local_queue, make_workload
from .test_article import article_core, gpu_cq

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
RTX_WORKER = frozenset({FlavorName("rtx-a1000")})
H100_WORKER = frozenset({FlavorName("h100")})


def launcher_and_trainers(trainer_gpus: int = 1, trainers: int = 4) -> Workload:
    """A JobSet's shape: a cpu-only launcher with no node selector, GPU trainers on h100."""
    return (
        make_workload("train", "ml-jobs")
        .queue("gpu-lq")
        .pod_set("launcher")
        .request("cpu", "1")
        .request("memory", "2Gi")
        .pod_set("trainers", trainers)
        .node_selector("gpu.model", "h100")
        .request("cpu", "4")
        .request("memory", "16Gi")
        .request("nvidia.com/gpu", trainer_gpus)
        .obj()
    )


def core_with_places(*places: frozenset[FlavorName]) -> AdmissionCore:
    core = article_core()
    core.upsert_cluster_queue(dataclasses.replace(gpu_cq(), colocated_flavors=places))
    return core


def flavors_of(core: AdmissionCore, name: str) -> dict[str, set[str]]:
    admission = core.admission(key(name, "ml-jobs"))
    assert admission is not None
    return {str(p.name): set(p.flavors.values()) for p in admission.pod_set_assignments}


def test_without_places_the_launcher_gets_the_first_flavor_as_kueue_gives_it() -> None:
    core = article_core()
    core.add_workload(launcher_and_trainers())
    core.schedule(now=1)
    assert flavors_of(core, "train") == {"launcher": {"rtx-a1000"}, "trainers": {"h100"}}


def test_a_cpu_only_launcher_gets_the_flavor_of_the_worker_its_trainers_need() -> None:
    core = core_with_places(RTX_WORKER, H100_WORKER)
    core.add_workload(launcher_and_trainers())
    result = core.schedule(now=1)
    assert admitted_keys(result) == ["ml-jobs/train"]
    assert flavors_of(core, "train") == {"launcher": {"h100"}, "trainers": {"h100"}}


def test_the_queues_own_preference_is_kept_when_one_place_offers_it() -> None:
    core = core_with_places(RTX_WORKER | H100_WORKER)
    core.add_workload(launcher_and_trainers())
    core.schedule(now=1)
    assert flavors_of(core, "train") == {"launcher": {"rtx-a1000"}, "trainers": {"h100"}}


def test_a_single_flavor_workload_is_unchanged_by_places() -> None:
    core = core_with_places(RTX_WORKER, H100_WORKER)
    core.add_workload(
        make_workload("cpu-only", "ml-jobs").queue("gpu-lq").request("cpu", "1").obj()
    )
    core.schedule(now=1)
    assert flavors_of(core, "cpu-only") == {"main": {"rtx-a1000"}}


def test_no_place_holds_it_all_says_so_per_place() -> None:
    core = core_with_places(RTX_WORKER, frozenset({FlavorName("a100")}))
    core.add_workload(launcher_and_trainers())
    result = core.schedule(now=1)
    assert admitted_keys(result) == []
    reason = core.pending_reason(key("train", "ml-jobs"))
    assert reason is not None and reason.kind is PendingKind.NO_MATCHING_FLAVOR
    assert "one worker" in reason.message and "[rtx-a1000]" in reason.message, reason.message
    assert "h100" in reason.message, reason.message


def test_places_are_tried_in_order_and_quota_decides() -> None:
    """The H100 place has quota for 4 GPUs; 5 trainers do not fit anywhere."""
    core = core_with_places(RTX_WORKER, H100_WORKER)
    core.add_workload(launcher_and_trainers(trainers=5))
    result = core.schedule(now=1)
    assert admitted_keys(result) == []
    reason = core.pending_reason(key("train", "ml-jobs"))
    assert reason is not None
    assert "nvidia.com/gpu" in reason.message, reason.message


def left_to_multikueue(name: str) -> Workload:
    wl = make_workload(name, "ml-jobs").queue("gpu-lq").request("cpu", "1").obj()
    return dataclasses.replace(wl, left_to_check=MULTIKUEUE)


def test_a_job_left_to_multikueue_waits_in_a_queue_without_its_check() -> None:
    core = article_core()
    core.add_workload(left_to_multikueue("escaped"))
    result = core.schedule(now=1)
    assert admitted_keys(result) == []
    reason = core.pending_reason(key("escaped", "ml-jobs"))
    assert reason is not None and reason.kind is PendingKind.CHECK_CONTROLLER_MISSING
    assert reason.condition_reason == "Inadmissible"
    assert "spec.managedBy" in reason.message and "gpu-cq" in reason.message, reason.message


def test_it_is_admitted_once_the_queue_gets_the_check() -> None:
    core = article_core()
    core.add_workload(left_to_multikueue("waits"))
    core.schedule(now=1)
    core.upsert_cluster_queue(
        dataclasses.replace(gpu_cq(), check_controllers=frozenset({MULTIKUEUE}))
    )
    assert admitted_keys(core.schedule(now=2)) == ["ml-jobs/waits"]


def test_moving_a_pending_workload_to_another_queue_moves_it() -> None:
    """A relabelled suspended Job's Workload changes queue (item 2): the core follows."""
    core = article_core()
    core.upsert_cluster_queue(dataclasses.replace(gpu_cq(), name=ClusterQueueName("other-cq")))
    core.upsert_local_queue(make_local_queue("other-lq", "ml-jobs", "other-cq"))
    wl = make_workload("moved", "ml-jobs").queue("no-such-lq").request("cpu", "1").obj()
    core.add_workload(wl)
    core.schedule(now=1)
    reason = core.pending_reason(key("moved", "ml-jobs"))
    assert reason is not None and reason.kind is PendingKind.LOCAL_QUEUE_MISSING
    core.add_workload(dataclasses.replace(wl, queue_name="other-lq"))
    result = core.schedule(now=2)
    assert admitted_keys(result) == ["ml-jobs/moved"]
    admission = core.admission(key("moved", "ml-jobs"))
    assert admission is not None and admission.cluster_queue == "other-cq"
