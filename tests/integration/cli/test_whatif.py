"""`kfed whatif` against a federation arranged on the lite clusters: a manager ClusterQueue
with two flavors and a MultiKueue check, and two workers registered with `kfed cluster add`
(worker-1 offers only the rtx flavor, worker-2 only h100, with some of it reserved). The
MultiKueueClusters' Active condition is written here, as the kfed manager would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from e2e.local.federation import LocalFederation
from manager.federation.engine.lookups import foreign_reason
from manager.kube import resources as R
from tests.integration.cli import objects
from tests.integration.cli.conftest import Cleanup, Kfed, Kube, namespace

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Federation:
    ns: str
    rtx: str
    h100: str
    w1: str
    w2: str
    worker_cq: str


@pytest.fixture
def federation(
    kueue_crds: LocalFederation,
    kfed: Kfed,
    manager: Kube,
    workers: dict[str, Kube],
    cleanup: Cleanup,
    unique: str,
) -> Federation:
    rtx, h100 = f"rtx-{unique}", f"h100-{unique}"
    cq, check, config = f"cq-{unique}", f"mk-{unique}", f"cfg-{unique}"
    worker_cq = f"worker-cq-{unique}"
    fed = Federation(f"ml-{unique}", rtx, h100, f"w1-{unique}", f"w2-{unique}", worker_cq)

    for name in (rtx, h100):
        manager.create(R.RESOURCE_FLAVORS, objects.flavor(name))
        cleanup.add(manager, R.RESOURCE_FLAVORS, name)
    manager.create(R.CLUSTER_QUEUES, objects.cluster_queue(cq, {rtx: 2, h100: 8}, [check]))
    cleanup.add(manager, R.CLUSTER_QUEUES, cq)
    manager.create(R.ADMISSION_CHECKS, objects.multikueue_check(check, config))
    cleanup.add(manager, R.ADMISSION_CHECKS, check)
    namespace(manager, cleanup, fed.ns)
    manager.create(R.LOCAL_QUEUES, objects.local_queue(fed.ns, "gpu-lq", cq))
    cleanup.add(manager, R.LOCAL_QUEUES, "gpu-lq", fed.ns)

    for worker, flavor_name, gpus in (("worker-1", rtx, 2), ("worker-2", h100, 8)):
        kube = workers[worker]
        kube.create(R.RESOURCE_FLAVORS, objects.flavor(flavor_name))
        cleanup.add(kube, R.RESOURCE_FLAVORS, flavor_name)
        kube.create(R.CLUSTER_QUEUES, objects.cluster_queue(worker_cq, {flavor_name: gpus}))
        cleanup.add(kube, R.CLUSTER_QUEUES, worker_cq)
        namespace(kube, cleanup, fed.ns)
        kube.create(R.LOCAL_QUEUES, objects.local_queue(fed.ns, "gpu-lq", worker_cq))
        cleanup.add(kube, R.LOCAL_QUEUES, "gpu-lq", fed.ns)
    workers["worker-2"].patch_status(
        R.CLUSTER_QUEUES,
        worker_cq,
        {
            "flavorsReservation": [
                {"name": h100, "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}
            ]
        },
    )

    cleanup.add(manager, R.MULTIKUEUE_CONFIGS, config)
    for name, worker in ((fed.w1, "worker-1"), (fed.w2, "worker-2")):
        cleanup.add(manager, R.SECRETS, name, kfed.namespace)
        cleanup.add(manager, R.MULTIKUEUE_CLUSTERS, name)
        kubeconfig_file = str(kueue_crds.kubeconfig(worker))
        result = kfed(
            "cluster",
            "add",
            name,
            "--kubeconfig-file",
            kubeconfig_file,
            "--config",
            config,
            "--no-wait",
        )
        assert result.exit_code == 0, result.output
        manager.patch_status(
            R.MULTIKUEUE_CLUSTERS,
            name,
            {"conditions": [objects.condition("Active", True, "Active", "Connected")]},
        )
    return fed


def _whatif(kfed: Kfed, manifest: str) -> dict[str, object]:
    result = kfed("whatif", "-", "--queue", "gpu-lq", "-o", "json", input=manifest)
    assert result.exit_code == 0, result.output
    [prediction] = json.loads(result.stdout)
    return prediction  # type: ignore[no-any-return]


def _verdicts(prediction: dict[str, object]) -> dict[str, tuple[bool, str]]:
    candidates = prediction["candidates"]
    assert isinstance(candidates, list)
    return {c["cluster"]: (c["fits"], c["reason"]) for c in candidates}


def test_an_h100_job_would_go_to_the_worker_with_h100_capacity(
    kfed: Kfed, manager: Kube, federation: Federation
) -> None:
    f = federation
    prediction = _whatif(kfed, objects.job_yaml(f.ns, "heavy", gpus=4, model=f.h100))

    assert prediction["manager_flavors"] == {"cpu": f.h100, "nvidia.com/gpu": f.h100}
    assert prediction["manager_fits_now"] is True
    verdicts = _verdicts(prediction)
    assert verdicts[f.w1] == (
        False,
        f"ClusterQueue {f.worker_cq} has no flavor matching {f.h100}",
    )
    assert verdicts[f.w2][0] is True
    assert "6 nvidia.com/gpu free" in verdicts[f.w2][1]
    assert prediction["chosen"] == f.w2
    assert manager(lambda api: api.list(R.JOBS, f.ns))["items"] == [], "whatif creates nothing"

    text = kfed(
        "whatif",
        "-",
        "--queue",
        "gpu-lq",
        input=objects.job_yaml(f.ns, "heavy", gpus=4, model=f.h100),
    )
    assert text.exit_code == 0, text.output
    assert text.stdout.strip().splitlines()[-1].startswith(f"would go to {f.w2}: fits in")


def test_a_light_job_takes_the_first_flavor_and_its_worker(
    kfed: Kfed, federation: Federation
) -> None:
    f = federation
    prediction = _whatif(kfed, objects.job_yaml(f.ns, "light", gpus=1))
    assert prediction["manager_flavors"] == {"cpu": f.rtx, "nvidia.com/gpu": f.rtx}
    assert prediction["chosen"] == f.w1


def test_no_worker_with_room_means_it_would_wait(kfed: Kfed, federation: Federation) -> None:
    f = federation
    prediction = _whatif(kfed, objects.job_yaml(f.ns, "big", gpus=8, model=f.h100))
    assert prediction["chosen"] is None
    assert _verdicts(prediction)[f.w2] == (
        False,
        f"insufficient nvidia.com/gpu in flavor {f.h100}: 8 requested, 6 free",
    )
    assert prediction["verdict"] == "would wait: no worker can admit it now"


def test_a_cordoned_worker_is_skipped(kfed: Kfed, federation: Federation) -> None:
    f = federation
    assert kfed("cluster", "cordon", f.w2).exit_code == 0
    prediction = _whatif(kfed, objects.job_yaml(f.ns, "heavy", gpus=4, model=f.h100))
    assert _verdicts(prediction)[f.w2] == (False, "in maintenance (cordon)")
    assert prediction["chosen"] is None


def test_a_job_the_manager_can_never_admit_is_an_error(kfed: Kfed, federation: Federation) -> None:
    f = federation
    result = kfed(
        "whatif",
        "-",
        "--queue",
        "gpu-lq",
        input=objects.job_yaml(f.ns, "huge", gpus=16, model=f.h100),
    )
    assert result.exit_code == 1
    assert "the manager would never admit Job" in result.stderr
    # The manager's admission core's own words.
    assert f"insufficient quota for nvidia.com/gpu in flavor {f.h100}: 16 requested" in (
        result.stderr
    )
    assert "can get at most 8 even when its cohort is idle" in result.stderr


def test_the_managers_admitted_workloads_hold_its_quota(
    kfed: Kfed, manager: Kube, cleanup: Cleanup, unique: str, federation: Federation
) -> None:
    """The manager's admission core decides on the workloads holding quota there: with 4 of
    its 8 h100 GPUs reserved, 6 more wait in its queue (the worker would have room)."""
    f = federation
    manager.create(R.WORKLOADS, objects.workload(f.ns, "running", "gpu-lq"))
    cleanup.add(manager, R.WORKLOADS, "running", f.ns)
    status = objects.reserved_status(
        f"cq-{unique}", f.h100, f"mk-{unique}", state="Ready", message="admitted"
    )
    manager.patch_status(R.WORKLOADS, "running", status, f.ns)

    prediction = _whatif(kfed, objects.job_yaml(f.ns, "six", gpus=6, model=f.h100))
    assert prediction["manager_outcome"] == "waits"
    assert prediction["manager_fits_now"] is False
    assert prediction["manager_flavors"] == {"cpu": f.h100, "nvidia.com/gpu": f.h100}
    assert (
        f"insufficient unused quota for nvidia.com/gpu in flavor {f.h100}: 6 requested, "
        "4 available" in str(prediction["manager_reason"])
    )
    assert prediction["chosen"] == f.w2
    assert str(prediction["verdict"]).endswith("(once the manager's queue has quota for it)")


# -- the dispatcher's own rules (issue "Finish the federation engine", item 4) ----------------


def test_a_foreign_job_of_that_name_blocks_a_worker_as_the_dispatcher_says(
    kfed: Kfed, workers: dict[str, Kube], cleanup: Cleanup, federation: Federation
) -> None:
    """A Job of the same name that kfed did not create on worker-2: the dispatcher would leave
    it alone and not place there; whatif says so in the dispatcher's words (before: it said
    the worker fits)."""
    f = federation
    foreign = yaml.safe_load(objects.job_yaml(f.ns, "heavy", gpus=4, model=f.h100))
    workers["worker-2"].create(R.JOBS, foreign)
    cleanup.add(workers["worker-2"], R.JOBS, "heavy", f.ns)
    prediction = _whatif(kfed, objects.job_yaml(f.ns, "heavy", gpus=4, model=f.h100))
    fits, reason = _verdicts(prediction)[f.w2]
    assert not fits
    assert reason == foreign_reason("Job", {"metadata": {"name": "heavy", "namespace": f.ns}})
    assert prediction["chosen"] is None


JOBSET_WITH_A_CPU_ONLY_DRIVER = """apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: train, namespace: {ns}}}
spec:
  replicatedJobs:
    - name: driver
      replicas: 1
      template:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: driver
                  image: busybox
                  resources: {{requests: {{cpu: "1"}}}}
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 2
          completions: 2
          template:
            spec:
              restartPolicy: Never
              nodeSelector: {{gpu.model: {model}}}
              containers:
                - name: worker
                  image: busybox
                  resources:
                    requests: {{cpu: "1", nvidia.com/gpu: "1"}}
                    limits: {{nvidia.com/gpu: "1"}}
"""


def test_a_jobset_is_charged_and_refused_as_the_manager_would(
    kfed: Kfed, federation: Federation
) -> None:
    """A cpu-only driver beside h100 trainers gets h100's quota for cpu too (the flavors one
    worker offers together, as the manager's core has them), and workers without JobSet's
    CRD are refused with the dispatcher's own reason ("serves the kind")."""
    f = federation
    prediction = _whatif(kfed, JOBSET_WITH_A_CPU_ONLY_DRIVER.format(ns=f.ns, model=f.h100))
    assert prediction["manager_flavors"] == {"cpu": f.h100, "nvidia.com/gpu": f.h100}
    for worker in (f.w1, f.w2):
        assert _verdicts(prediction)[worker] == (
            False,
            "does not serve JobSet (jobset.x-k8s.io/v1alpha2): no CRD there",
        )


def _dra_job(ns: str, model: str, template: str) -> str:
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: devices
  namespace: {ns}
spec:
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        gpu.model: {model}
      resourceClaims:
        - name: gpus
          resourceClaimTemplateName: {template}
      containers:
        - name: main
          image: busybox
          resources:
            requests: {{cpu: "1"}}
            claims: [{{name: gpus}}]
"""


def test_a_dra_job_is_charged_by_the_managers_mapping(
    kfed: Kfed,
    manager: Kube,
    workers: dict[str, Kube],
    federation: Federation,
    cleanup: Cleanup,
    unique: str,
    tmp_path: Path,
) -> None:
    """The job claims 2 devices of a DeviceClass on worker-2 from a template on the manager:
    without the manager's mapping whatif says the manager would never admit it (the class is
    not mapped); with its --config file the 2 devices are charged as the mapping says (here
    as nvidia.com/gpu, which the queues cover), and worker-2, whose one node has 4 free,
    is chosen with where its devices are."""
    f = federation
    driver, device_class, node = f"{unique}.example.com", f"gpu.{unique}.example.com", f"n-{unique}"
    worker2 = workers["worker-2"]
    worker2.create(
        R.DEVICE_CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    cleanup.add(worker2, R.DEVICE_CLASSES, device_class)
    worker2.create(
        R.RESOURCE_SLICES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": node},
            "spec": {
                "driver": driver,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "nodeName": node,
                "devices": [{"name": f"gpu-{i}"} for i in range(4)],
            },
        },
    )
    cleanup.add(worker2, R.RESOURCE_SLICES, node)
    manager.create(
        R.RESOURCE_CLAIM_TEMPLATES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two", "namespace": f.ns},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "g", "exactly": {"deviceClassName": device_class, "count": 2}}
                        ]
                    }
                }
            },
        },
    )
    job = _dra_job(f.ns, f.h100, "two")

    unmapped = kfed("whatif", "-", "--queue", "gpu-lq", input=job)
    assert unmapped.exit_code != 0
    assert f"DeviceClass {device_class} is not mapped in DRA configuration" in unmapped.output

    config = tmp_path / "manager-config.yaml"
    mapping = [{"name": "nvidia.com/gpu", "deviceClassNames": [device_class]}]
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "resources": {"deviceClassMappings": mapping},
                "kfed": {"failoverPolicy": "fast"},
            }
        )
    )
    result = kfed(
        "whatif", "-", "--queue", "gpu-lq", "--config", str(config), "-o", "json", input=job
    )
    assert result.exit_code == 0, result.output
    [prediction] = json.loads(result.stdout)
    assert prediction["device_charge"] == {"main": {"nvidia.com/gpu": 2}}
    assert prediction["requests"]["nvidia.com/gpu"] == "2"
    assert prediction["chosen"] == f.w2
    assert _verdicts(prediction)[f.w2][1].endswith(f"devices: 1 pod on {node}")

    text = kfed(
        "whatif",
        "-",
        "--queue",
        "gpu-lq",
        "--device-class-mappings",
        json.dumps(mapping),
        input=job,
    )
    assert text.exit_code == 0, text.output
    assert "devices charged per pod of main: 2 nvidia.com/gpu" in text.stdout
