"""`kfed submit` and `kfed whatif` read Job manifests: only valid batch/v1 Jobs pass, and a
submitted Job gets its queue label and `suspend: true`."""

from __future__ import annotations

import textwrap

import pytest

from e2e.examples import JOBS
from manager.api import constants as C
from manager.cli.common import EXIT_USAGE, CliError
from manager.cli.jobfiles import display_name, parse_jobs, prepare
from manager.controllers.jobkinds.appwrapper import APPWRAPPER
from manager.controllers.jobkinds.jaxjob import JAXJOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.paddlejob import PADDLEJOB
from manager.controllers.jobkinds.pod import POD
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.rayjob import RAYJOB
from manager.controllers.jobkinds.serving import DEPLOYMENT, STATEFULSET
from manager.controllers.jobkinds.tfjob import TFJOB
from manager.controllers.jobkinds.xgboostjob import XGBOOSTJOB

LIGHT_JOB = textwrap.dedent(
    """
    apiVersion: batch/v1
    kind: Job
    metadata:
      name: light-job
      namespace: ml-jobs
    spec:
      parallelism: 2
      template:
        spec:
          restartPolicy: Never
          nodeSelector:
            gpu.model: rtx-a1000
          containers:
            - name: cuda
              image: busybox
              resources:
                requests:
                  cpu: "2"
                  memory: 4Gi
                  nvidia.com/gpu: "1"
    """
)


def _usage_error(text: str) -> str:
    with pytest.raises(CliError) as caught:
        parse_jobs(text, "job.yaml")
    assert caught.value.code == EXIT_USAGE
    return caught.value.message


def test_a_valid_job_parses() -> None:
    [job] = parse_jobs(LIGHT_JOB, "job.yaml")
    assert job["metadata"]["name"] == "light-job"


def test_several_documents_parse_in_order() -> None:
    second = LIGHT_JOB.replace("light-job", "second-job")
    jobs = parse_jobs(f"{LIGHT_JOB}\n---\n{second}\n---\n", "job.yaml")
    assert [j["metadata"]["name"] for j in jobs] == ["light-job", "second-job"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "kind: Service\napiVersion: v1\nmetadata: {name: p}\n",
            "is a Service (v1), not a kind of job kfed queues (batch/v1 Job, "
            "jobset.x-k8s.io/v1alpha2 JobSet, ray.io/v1 RayCluster, ray.io/v1 RayJob, "
            "trainer.kubeflow.org/v1alpha1 TrainJob, kubeflow.org/v1 PyTorchJob, "
            "kubeflow.org/v2beta1 MPIJob, kubeflow.org/v1 TFJob, kubeflow.org/v1 XGBoostJob, "
            "kubeflow.org/v1 PaddleJob, kubeflow.org/v1 JAXJob, "
            "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet, "
            "workload.codeflare.dev/v1beta2 AppWrapper, apps/v1 StatefulSet, "
            "apps/v1 Deployment, v1 Pod)",
        ),
        (
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\n",
            "(JobSet js) has no spec",
        ),
        (
            "apiVersion: jobset.x-k8s.io/v1alpha1\nkind: JobSet\nmetadata: {name: js}\n",
            "is a JobSet (jobset.x-k8s.io/v1alpha1), not a kind of job kfed queues",
        ),
        (
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\n"
            "spec: {replicatedJobs: []}\n",
            "(JobSet js) has no pods to run",
        ),
        (
            "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: r}\n"
            "spec: {workerGroupSpecs: [{replicas: many}]}\n",
            "(RayCluster r) has no readable pod sets",
        ),
        ("- a\n- b\n", "is not a YAML mapping"),
        ("", "has no YAML documents"),
        ("key: [unclosed\n", "is not valid YAML"),
        (LIGHT_JOB.replace("  name: light-job\n", ""), "has no metadata.name"),
        # A metadata that is not a mapping: the view's error, as a usage error.
        ("apiVersion: batch/v1\nkind: Job\nmetadata: light-job\n", "metadata is not an object"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {}\n",
            "is not a valid Job: spec.template",
        ),
    ],
)
def test_anything_but_a_valid_job_is_refused_with_where(text: str, expected: str) -> None:
    assert expected in _usage_error(text)


JOBSET_MANIFEST = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train, namespace: ml-jobs}
spec:
  replicatedJobs:
    - name: workers
      replicas: 2
      template: {spec: {template: {spec: {containers: [{name: c, image: x}]}}}}
"""
TRAINJOB_MANIFEST = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj}
spec: {runtimeRef: {name: torch-distributed}, trainer: {numNodes: 2}}
"""


def test_jobsets_and_trainjobs_parse_and_are_prepared_like_jobs() -> None:
    """Every kind kfed queues is submitted as a Job is; a TrainJob's pod sets are in its
    runtime, which the manager reads (not checked here)."""
    jobset, trainjob = parse_jobs(f"{JOBSET_MANIFEST}---\n{TRAINJOB_MANIFEST}", "jobs.yaml")
    ready, _ = prepare(jobset, queue="gpu-lq")
    assert ready["spec"]["suspend"] is True
    assert ready["metadata"]["labels"][C.QUEUE_NAME_LABEL] == "gpu-lq"
    assert display_name(ready) == "JobSet ml-jobs/train"
    assert display_name(trainjob) == "TrainJob default/tj"


def test_prepare_adds_the_queue_label_and_suspends() -> None:
    [job] = parse_jobs(LIGHT_JOB, "job.yaml")
    ready, warnings = prepare(job, queue="gpu-lq")
    assert ready["metadata"]["labels"][C.QUEUE_NAME_LABEL] == "gpu-lq"
    assert ready["spec"]["suspend"] is True
    assert warnings == []
    assert "labels" not in job["metadata"], "the parsed manifest is left unchanged"


def test_prepare_keeps_the_manifest_queue_unless_overridden() -> None:
    [job] = parse_jobs(LIGHT_JOB, "job.yaml")
    job["metadata"]["labels"] = {C.QUEUE_NAME_LABEL: "from-file"}
    assert prepare(job, queue=None)[0]["metadata"]["labels"][C.QUEUE_NAME_LABEL] == "from-file"
    assert prepare(job, queue="cli")[0]["metadata"]["labels"][C.QUEUE_NAME_LABEL] == "cli"


def test_prepare_refuses_a_job_without_any_queue() -> None:
    [job] = parse_jobs(LIGHT_JOB, "job.yaml")
    with pytest.raises(CliError) as caught:
        prepare(job, queue=None)
    assert caught.value.code == EXIT_USAGE
    assert "--queue" in caught.value.message


def test_prepare_defaults_the_namespace_and_overrides_an_explicit_unsuspend() -> None:
    [job] = parse_jobs(LIGHT_JOB.replace("  namespace: ml-jobs\n", ""), "job.yaml")
    job["spec"]["suspend"] = False
    ready, warnings = prepare(job, queue="q")
    assert ready["metadata"]["namespace"] == "default"
    assert ready["spec"]["suspend"] is True
    assert len(warnings) == 1 and "suspend: false" in warnings[0]


def test_the_job_examples_parse_with_their_pod_sets() -> None:
    """``examples/jobs/`` are valid submissions: the JobSet is 1 driver and 4 GPU workers;
    the TrainJob's, RayCluster's, PyTorchJob's and MPIJob's pod sets are what docs/jobs.md
    says."""
    found = {}
    for path in sorted(JOBS.glob("*.yaml")):
        [doc] = parse_jobs(path.read_text(), str(path))
        found[doc["kind"]] = doc
    assert set(found) == {
        *("JobSet", "TrainJob", "RayCluster", "RayJob", "PyTorchJob", "MPIJob", "LeaderWorkerSet"),
        *("TFJob", "XGBoostJob", "PaddleJob", "JAXJob"),
        *("StatefulSet", "Deployment", "AppWrapper", "Pod"),
    }
    jobset = JOBSET.pod_sets(found["JobSet"])
    assert [(ps.name, ps.count) for ps in jobset] == [("driver", 1), ("workers", 4)]
    ray = RAYCLUSTER.pod_sets(found["RayCluster"])
    assert [(ps.name, ps.count) for ps in ray] == [("head", 1), ("gpu", 2)]
    rayjob = RAYJOB.pod_sets(found["RayJob"])
    assert [(ps.name, ps.count) for ps in rayjob] == [("head", 1), ("gpu", 2), ("submitter", 1)]
    assert found["TrainJob"]["spec"]["trainer"]["numNodes"] == 2
    pytorch = PYTORCHJOB.pod_sets(found["PyTorchJob"])
    assert [(ps.name, ps.count) for ps in pytorch] == [("master", 1), ("worker", 2)]
    mpi = MPIJOB.pod_sets(found["MPIJob"])
    assert [(ps.name, ps.count) for ps in mpi] == [("launcher", 1), ("worker", 2)]
    for kubeflow, first in ((TFJOB, "chief"), (XGBOOSTJOB, "master"), (PADDLEJOB, "master")):
        pods = kubeflow.pod_sets(found[kubeflow.resource.kind])
        assert [(ps.name, ps.count) for ps in pods] == [(first, 1), ("worker", 2)]
    assert [(ps.name, ps.count) for ps in JAXJOB.pod_sets(found["JAXJob"])] == [("worker", 3)]
    wrapped = APPWRAPPER.pod_sets(found["AppWrapper"])
    assert [(ps.name, ps.count) for ps in wrapped] == [("appwrapper-h100-0", 2)]
    for kind, count in ((STATEFULSET, 3), (DEPLOYMENT, 2)):
        pods = kind.pod_sets(found[kind.resource.kind])
        assert [(ps.name, ps.count) for ps in pods] == [("main", count)]
    assert [(ps.name, ps.count) for ps in POD.pod_sets(found["Pod"])] == [("main", 1)]
