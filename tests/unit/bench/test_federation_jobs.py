"""The federation benchmark's Jobs and topology: what it submits and where it can run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from e2e.bench.federation import jobs, topology
from e2e.bench.federation.topology import Topology
from e2e.local.federation import load_node_sets
from manager.api import constants as C
from manager.kube import resources as R


def test_half_the_jobs_ask_for_each_flavor_interleaved() -> None:
    batch = jobs.load_jobs(10, jobs.JobShape())
    flavors = [j["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"] for j in batch]
    assert Counter(flavors) == {"rtx-a1000": 5, "h100": 5}
    assert flavors[:4] == ["rtx-a1000", "h100", "rtx-a1000", "h100"]
    assert len({j["metadata"]["name"] for j in batch}) == 10


def test_a_job_is_what_the_manager_webhook_would_have_made_of_it() -> None:
    job = jobs.job_manifest("bench-00001", "h100", jobs.JobShape(runtime_ms=1500))
    assert job["metadata"]["namespace"] == jobs.NAMESPACE
    assert job["metadata"]["labels"][C.QUEUE_NAME_LABEL] == jobs.LOCAL_QUEUE
    assert job["spec"]["suspend"] is True
    assert job["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"][jobs.KWOK_DELAY_ANNOTATION] == "1500"
    resources = template["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"}
    assert resources["limits"] == resources["requests"]


def test_the_job_list_is_the_same_for_every_mode() -> None:
    shape = jobs.JobShape()
    assert jobs.load_jobs(6, shape) == jobs.load_jobs(6, shape)


def test_an_unknown_flavor_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown flavor 'a100'"):
        jobs.job_manifest("x", "a100", jobs.JobShape())


def test_probes_alternate_flavors_and_run_until_deleted() -> None:
    assert [jobs.probe_flavor(i) for i in range(4)] == ["h100", "rtx-a1000", "h100", "rtx-a1000"]
    probe = jobs.probe_job(3, jobs.JobShape())
    assert probe["metadata"]["name"] == "probe-03"
    assert probe["metadata"]["labels"][jobs.BENCH_LABEL] == "probe"
    assert probe["spec"]["template"]["metadata"]["labels"][jobs.BENCH_LABEL] == "probe"
    delay = probe["spec"]["template"]["metadata"]["annotations"][jobs.KWOK_DELAY_ANNOTATION]
    assert int(delay) >= 3_600_000


def test_submissions_follow_an_absolute_steady_schedule() -> None:
    assert jobs.submission_offsets(4, 2.0) == [0.0, 0.5, 1.0, 1.5]
    assert jobs.submission_offsets(0, 2.0) == []
    with pytest.raises(ValueError, match="must be positive"):
        jobs.submission_offsets(3, 0)


def test_every_flavor_has_two_workers_so_a_drill_always_has_somewhere_to_go() -> None:
    topo = Topology()
    assert topo.workers == ["worker-1", "worker-2", "worker-3"]
    for flavor in jobs.FLAVORS:
        assert len(topo.workers_with(flavor)) == 2


def test_quotas_match_the_nodes_and_the_manager_holds_the_sum() -> None:
    topo = Topology()
    assert topo.worker_quota() == {"cpu": 128, "memory_gi": 512, "gpu": 256}
    assert topo.manager_quota("h100") == {"cpu": 256, "memory_gi": 1024, "gpu": 512}
    cq = dict(topology.worker_queues(topo, "worker-3"))[R.CLUSTER_QUEUES]
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in flavors] == ["rtx-a1000", "h100"]
    assert flavors[0]["resources"][2] == {"name": "nvidia.com/gpu", "nominalQuota": 256}
    assert "admissionChecksStrategy" not in cq["spec"]
    manager_cq = dict(topology.manager_queues(topo))[R.CLUSTER_QUEUES]
    assert manager_cq["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": topology.CHECK}]
    }


def test_the_nodes_file_is_one_e2e_local_reads(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump(topology.nodes_file(Topology())))
    groups = load_node_sets(path, ["manager", "worker-1", "worker-2", "worker-3"])
    assert groups["manager"] == []
    assert [g.labels["gpu.model"] for g in groups["worker-3"]] == ["rtx-a1000", "h100"]
    assert groups["worker-1"][0].capacity["nvidia.com/gpu"] == "128"
    assert all(g.count == 2 for gs in groups.values() for g in gs)


def test_registration_points_every_cluster_at_its_secret() -> None:
    objects = topology.registration({"worker-2": "config-2", "worker-1": "config-1"})
    kinds = [body["kind"] for _, body in objects]
    assert kinds == [
        "Namespace",
        "Secret",
        "MultiKueueCluster",
        "Secret",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "AdmissionCheck",
    ]
    config = next(body for _, body in objects if body["kind"] == "MultiKueueConfig")
    assert config["spec"]["clusters"] == ["worker-1", "worker-2"]
    check = next(body for _, body in objects if body["kind"] == "AdmissionCheck")
    assert check["spec"]["controllerName"] == C.MULTIKUEUE_CONTROLLER_NAME
