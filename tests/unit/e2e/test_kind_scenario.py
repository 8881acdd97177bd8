"""The kind scenario's parts that need no Docker: the generated kind configurations, the
node status patches that advertise GPUs, the worker queues, the placement check, and the
exact commands, in order, recorded by a PlanShell."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from e2e.kind import layout
from e2e.kind.__main__ import main as kind_main
from e2e.kind.scenario import (
    CRDS,
    MAKE_KUBECONFIG,
    MANAGER_OVERLAY,
    SEED,
    WORKER_OVERLAY,
    KindScenario,
    placed_as_the_article_says,
    placements,
)
from e2e.kind.shell import Planned, PlanShell
from manager.federation.workers import kubeconfig

Plan = tuple[KindScenario, PlanShell]


@pytest.fixture
def plan(tmp_path: Path) -> tuple[KindScenario, PlanShell]:
    shell = PlanShell()
    scenario = KindScenario(shell, name="t", directory=tmp_path, kubectl="kubectl", kfed="kfed")
    scenario.run()
    return scenario, shell


def commands(shell: PlanShell, *head: str) -> list[Planned]:
    return [c for c in shell.commands if c.argv[: len(head)] == head]


def test_the_clusters_are_the_articles() -> None:
    by_name = {c.name: c for c in layout.CLUSTERS}

    assert list(by_name) == ["manager", "worker-1", "worker-2"]
    assert by_name["manager"].nodes == ()
    assert [n.model for n in layout.queued_nodes(by_name["worker-1"])] == ["rtx-a1000"]
    assert [n.model for n in layout.queued_nodes(by_name["worker-2"])] == ["h100"]
    assert [n.model for n in layout.spare_flavors(by_name["worker-2"])] == ["rtx-a1000"]


def test_kind_configs_label_one_worker_node_per_gpu_node(plan: Plan) -> None:
    _, shell = plan
    configs = {path.parent.name: yaml.safe_load(text) for path, text in shell.files.items()}

    assert configs["manager"]["nodes"] == [{"role": "control-plane"}]
    assert configs["worker-2"]["nodes"] == [
        {"role": "control-plane"},
        {"role": "worker", "labels": {"gpu.model": "h100"}},
        {"role": "worker", "labels": {"gpu.model": "rtx-a1000"}},
    ]
    assert all(c["apiVersion"] == "kind.x-k8s.io/v1alpha4" for c in configs.values())
    image = layout.kind_config(layout.CLUSTERS[1], "kindest/node:v1.34.0")
    assert {n["image"] for n in image["nodes"]} == {"kindest/node:v1.34.0"}


def test_gpus_are_patched_onto_each_gpu_nodes_status(plan: Plan) -> None:
    _, shell = plan
    node_patches = [c.argv for c in commands(shell, "kubectl") if c.argv[2:4] == ("patch", "node")]
    patches = {argv[4]: argv for argv in node_patches}

    assert sorted(patches) == [
        "kfed-t-worker-1-worker",
        "kfed-t-worker-2-worker",
        "kfed-t-worker-2-worker2",
    ]
    argv = patches["kfed-t-worker-2-worker"]
    assert "--subresource=status" in argv and "--type=json" in argv
    patch = json.loads(next(a for a in argv if a.startswith("--patch=")).split("=", 1)[1])
    assert patch == [
        {"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "4"},
        {"op": "add", "path": "/status/allocatable/nvidia.com~1gpu", "value": "4"},
    ]


def test_the_phases_run_in_order(plan: Plan) -> None:
    _, shell = plan

    def first(*words: str) -> int:
        return next(i for i, c in enumerate(shell.commands) if all(w in c.argv for w in words))

    assert (
        first("create", "cluster")
        < first("patch", "node")
        < first("docker", "build")
        < first("load", "docker-image")
        < first("apply", "-k")
        < first("rollout", "status")
        < first("docker", "inspect")
        < first(str(MAKE_KUBECONFIG))
        < first("cluster", "add")
        < first("apply", str(SEED / "02-light-job.yaml"))
        < first("drill", "partition")
    )


def test_each_cluster_gets_its_overlay_and_is_waited_for(
    plan: Plan,
) -> None:
    scenario, shell = plan
    applies = [c.argv for c in commands(shell, "kubectl") if "-k" in c.argv]

    assert [(a[1], a[-1]) for a in applies] == [
        (f"--kubeconfig={scenario.kubeconfig('manager')}", str(CRDS)),
        (f"--kubeconfig={scenario.kubeconfig('manager')}", str(MANAGER_OVERLAY)),
        (f"--kubeconfig={scenario.kubeconfig('worker-1')}", str(CRDS)),
        (f"--kubeconfig={scenario.kubeconfig('worker-1')}", str(WORKER_OVERLAY)),
        (f"--kubeconfig={scenario.kubeconfig('worker-2')}", str(CRDS)),
        (f"--kubeconfig={scenario.kubeconfig('worker-2')}", str(WORKER_OVERLAY)),
    ], "the CRDs first, on their own: the overlays leave them out"
    assert all("--server-side" in a for a in applies), "the CRDs are too large for client-side"
    assert MANAGER_OVERLAY.is_dir() and WORKER_OVERLAY.is_dir()
    rollouts = [c.argv[-2] for c in commands(shell, "kubectl") if "rollout" in c.argv]
    assert rollouts == [
        "deployment/kfed-manager",
        "deployment/kfed-worker-shim",
        "deployment/kfed-worker-shim",
    ]
    loads = [c.argv for c in commands(shell, "kind", "load")]
    assert [a[-1] for a in loads] == [
        "--name=kfed-t-manager",
        "--name=kfed-t-worker-1",
        "--name=kfed-t-worker-2",
    ]
    assert all(a[3] == scenario.image for a in loads)


def test_workers_are_registered_at_their_kind_network_address_with_a_service_account(
    plan: Plan,
) -> None:
    scenario, shell = plan
    (make_1, make_2) = commands(shell, "bash", str(MAKE_KUBECONFIG))
    adds = commands(shell, "kfed", "cluster", "add")

    assert MAKE_KUBECONFIG.exists()
    assert "--server=https://<kfed-t-worker-1-control-plane address on the kind network>:6443" in (
        make_1.argv
    )
    assert f"--output={scenario.remote_kubeconfig('worker-2')}" in make_2.argv
    assert [a.argv[3] for a in adds] == ["worker-1", "worker-2"]
    assert str(scenario.remote_kubeconfig("worker-1")) in adds[0].argv
    inspect = commands(shell, "docker", "inspect")
    assert [c.argv[-1] for c in inspect] == [
        "kfed-t-worker-1-control-plane",
        "kfed-t-worker-2-control-plane",
    ]


def test_the_article_is_applied_unchanged_and_the_placement_awaited(
    plan: Plan,
) -> None:
    _, shell = plan
    files = [c.argv[-1] for c in commands(shell, "kubectl") if c.argv[-2:-1] == ("-f",)]

    seeds = [f for f in files if f != "-"]
    article = ("01-queues.yaml", "02-light-job.yaml", "03-heavy-job.yaml")
    assert seeds == [str(SEED / name) for name in article]
    assert all(Path(f).exists() for f in seeds)
    (wait,) = [c for c in shell.commands if c.waits_for]
    assert wait.argv[-5:] == ("workloads", "-n", "ml-jobs", "-o", "json")
    assert wait.waits_for == "light-job placed on worker-1 and heavy-job on worker-2"


def test_worker_queues_offer_the_gpus_each_worker_has(plan: Plan) -> None:
    _, shell = plan
    manifests = [list(yaml.safe_load_all(c.input)) for c in shell.commands if c.input]
    flavors = [
        {o["metadata"]["name"] for o in m if o["kind"] == "ResourceFlavor"} for m in manifests
    ]

    # manager check, worker-1, worker-2 (article), worker-2 again with its spare (drill)
    assert flavors == [set(), {"rtx-a1000"}, {"h100"}, {"h100", "rtx-a1000"}]
    (check,) = manifests[0]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"


def test_the_drill_partitions_worker_1_through_a_non_routable_address(
    plan: Plan,
) -> None:
    _, shell = plan
    (drill,) = commands(shell, "kfed", "drill")

    assert drill.argv[:5] == ("kfed", "drill", "partition", "--cluster", "worker-1")
    assert drill.argv[drill.argv.index("--blackhole") + 1] == "10.255.255.1:6443"


def test_a_worker_queue_is_what_the_capacity_view_expects() -> None:
    docs = layout.worker_queues([layout.GpuNode("h100", 4)])
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    lq = next(d for d in docs if d["kind"] == "LocalQueue")

    assert lq["metadata"] == {"name": "gpu-lq", "namespace": "ml-jobs"}
    assert lq["spec"]["clusterQueue"] == cq["metadata"]["name"] == "gpu-cq"
    (flavor,) = cq["spec"]["resourceGroups"][0]["flavors"]
    gpu = next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")
    assert flavor["name"] == "h100" and gpu["nominalQuota"] == 4


def workloads_json(*placed: tuple[str, str | None]) -> str:
    return json.dumps(
        {
            "items": [
                {
                    "metadata": {"ownerReferences": [{"kind": "Job", "name": job}]},
                    "status": {"clusterName": cluster} if cluster else {},
                }
                for job, cluster in placed
            ]
        }
    )


def test_the_placement_check_reads_the_workloads_cluster_names() -> None:
    right = workloads_json(("light-job", "worker-1"), ("heavy-job", "worker-2"))
    pending = workloads_json(("light-job", "worker-1"), ("heavy-job", None))
    wrong = workloads_json(("light-job", "worker-2"), ("heavy-job", "worker-2"))

    assert placed_as_the_article_says(right)
    assert not placed_as_the_article_says(pending)
    assert not placed_as_the_article_says(wrong)
    assert placements(pending) == {"light-job": "worker-1"}
    assert placements("not json") == {}


def test_plan_prints_the_commands_without_running_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert kind_main(["plan", "register", "--name", "p"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0].rsplit("/", 1)[-1] for line in out] == [
        *("docker", "bash", "kfed"),
        *("docker", "bash", "kfed"),
    ]
    assert sum("cluster add worker-" in line for line in out) == 2


def test_bad_phases_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kind_main(["plan", "nonsense"])
    assert "unknown phase 'nonsense'" in capsys.readouterr().err


def test_the_made_kubeconfig_shape_passes_kfeds_validation() -> None:
    """What make-kubeconfig.sh writes, with the values of the kind scenario: an IP server,
    inline CA data and token (tests/integration/deploy runs the script itself)."""
    text = f"""
apiVersion: v1
kind: Config
clusters:
  - name: worker-1
    cluster:
      server: https://172.18.0.3:6443
      certificate-authority-data: {base64.b64encode(b"CA PEM").decode()}
users:
  - name: worker-1-kfed-manager-remote
    user:
      token: header.payload.signature
contexts:
  - name: worker-1
    context:
      cluster: worker-1
      user: worker-1-kfed-manager-remote
current-context: worker-1
"""
    assert kubeconfig.check(text).server == "https://172.18.0.3:6443"
    script = MAKE_KUBECONFIG.read_text()
    for line in ("certificate-authority-data: $ca_data", "token: $token", "server: $server"):
        assert line in script
