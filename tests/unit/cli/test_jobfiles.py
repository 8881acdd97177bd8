"""`kfed submit` and `kfed whatif` read Job manifests: only valid batch/v1 Jobs pass, and a
submitted Job gets its queue label and `suspend: true`."""

from __future__ import annotations

import textwrap

import pytest

from manager.api import constants as C
from manager.cli.common import EXIT_USAGE, CliError
from manager.cli.jobfiles import parse_jobs, prepare

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
        ("kind: Pod\napiVersion: v1\nmetadata: {name: p}\n", "is a Pod (v1), not a batch/v1 Job"),
        ("- a\n- b\n", "is not a YAML mapping"),
        ("", "has no YAML documents"),
        ("key: [unclosed\n", "is not valid YAML"),
        (LIGHT_JOB.replace("  name: light-job\n", ""), "has no metadata.name"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {}\n",
            "is not a valid Job: spec.template",
        ),
    ],
)
def test_anything_but_a_valid_job_is_refused_with_where(text: str, expected: str) -> None:
    assert expected in _usage_error(text)


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
