"""kfed's own examples (``examples/``): the article's manifests with exactly the article's
names, labels, requests and quotas; registration objects and worker queues that kfed's API
models accept; and a README that lists every file.

When the article's published manifests are beside the checkout (a developer's workspace, not
a user's clone), kfed's copies must mean exactly the same; that one comparison is skipped
otherwise, and every other assertion here runs regardless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import examples
from e2e.local.federation import DEFAULT_NODES_FILE
from manager import configfile
from manager.api import dra, parse_object
from manager.controllers import flags, taspods
from tests import references


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents(path)}


def test_the_article_queues_are_the_articles() -> None:
    objs = by_kind(examples.QUEUES)
    assert set(objs) == {
        ("Namespace", "ml-jobs"),
        ("ResourceFlavor", "rtx-a1000"),
        ("ResourceFlavor", "h100"),
        ("ClusterQueue", "gpu-cq"),
        ("LocalQueue", "gpu-lq"),
    }
    for flavor in ("rtx-a1000", "h100"):
        assert objs["ResourceFlavor", flavor]["spec"]["nodeLabels"] == {"gpu.model": flavor}
    (group,) = objs["ClusterQueue", "gpu-cq"]["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    quotas = {
        f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]
    }
    assert quotas == {
        "rtx-a1000": {"cpu": 32, "memory": "128Gi", "nvidia.com/gpu": 2},
        "h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 4},
    }
    assert [f["name"] for f in group["flavors"]] == ["rtx-a1000", "h100"]
    local = objs["LocalQueue", "gpu-lq"]
    assert local["metadata"]["namespace"] == "ml-jobs"
    assert local["spec"] == {"clusterQueue": "gpu-cq"}
    for doc in documents(examples.QUEUES):
        if doc["apiVersion"].startswith("kueue.x-k8s.io/"):
            parse_object(doc)


@pytest.mark.parametrize(
    ("path", "name", "flavor", "cpu", "memory"),
    [
        (examples.LIGHT_JOB, "light-job", "rtx-a1000", "2", "4Gi"),
        (examples.HEAVY_JOB, "heavy-job", "h100", "8", "32Gi"),
    ],
)
def test_the_article_jobs_are_the_articles(
    path: Path, name: str, flavor: str, cpu: str, memory: str
) -> None:
    (job,) = documents(path)
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert job["metadata"] == {
        "name": name,
        "namespace": "ml-jobs",
        "labels": {"kueue.x-k8s.io/queue-name": "gpu-lq"},
    }
    assert job["spec"]["suspend"] is True
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu.model": flavor}
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    wanted = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": "1"}
    assert container["resources"] == {"requests": wanted, "limits": wanted}


@pytest.mark.parametrize("name", ["01-queues.yaml", "02-light-job.yaml", "03-heavy-job.yaml"])
def test_kfeds_copy_means_exactly_the_published_article(name: str) -> None:
    published = references.ARTICLE_SEED / name
    if reason := references.missing(published, "the article's published manifests"):
        pytest.skip(reason)
    assert documents(examples.ARTICLE / name) == documents(published)


def test_the_registration_objects_are_what_kfed_cluster_add_writes() -> None:
    from manager.cli import registration, workerobjects

    clusters = documents(examples.REGISTRATION / "02-multikueue-clusters.yaml")
    for cluster in clusters:
        parse_object(cluster)
        name = cluster["metadata"]["name"]
        written = workerobjects.multikueue_cluster(name, name)
        assert cluster["spec"] == written["spec"], name
    check = by_kind(examples.MULTIKUEUE_CHECK)
    config = check["MultiKueueConfig", registration.DEFAULT_CONFIG]
    assert config["spec"]["clusters"] == [c["metadata"]["name"] for c in clusters]
    admission = check["AdmissionCheck", "multikueue"]
    assert admission["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    assert admission["spec"]["parameters"]["name"] == config["metadata"]["name"]
    for doc in check.values():
        parse_object(doc)
    (secret,) = documents(examples.REGISTRATION / "01-worker-secret.yaml")
    assert secret["metadata"] == {"name": "worker-1", "namespace": "kueue-system"}
    assert set(secret["stringData"]) == {"kubeconfig"}
    (namespace,) = documents(examples.REGISTRATION / "00-namespace.yaml")
    assert namespace["metadata"]["name"] == secret["metadata"]["namespace"]
    patch = yaml.safe_load(examples.CLUSTERQUEUE_PATCH.read_text())
    assert patch == {
        "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "multikueue"}]}}
    }


@pytest.mark.parametrize("worker", ["worker-1", "worker-2"])
def test_each_workers_queues_are_valid_and_named_like_the_managers(worker: str) -> None:
    objs = by_kind(examples.WORKERS / f"{worker}-queues.yaml")
    for (kind, _), doc in objs.items():
        if kind != "Namespace":
            parse_object(doc)
    assert ("ClusterQueue", "gpu-cq") in objs
    assert objs["LocalQueue", "gpu-lq"]["metadata"]["namespace"] == "ml-jobs"


def test_the_readme_lists_every_example() -> None:
    readme = (examples.EXAMPLES / "README.md").read_text()
    files = sorted(p for p in examples.EXAMPLES.rglob("*.yaml"))
    assert files
    for path in files:
        assert f"`{path.name}`" in readme, path.name


def test_the_dra_example_is_valid_and_its_two_mappings_are_one() -> None:
    for name in ("01-queues.yaml", "02-worker-queues.yaml"):
        objs = by_kind(examples.DRA / name)
        for (kind, _), doc in objs.items():
            if kind != "Namespace":
                parse_object(doc)
        covered = objs["ClusterQueue", "dra-cq"]["spec"]["resourceGroups"][0]["coveredResources"]
        assert "example.com/gpu" in covered
    from_json = flags.device_class_mappings(f"@{examples.DRA / 'device-class-mappings.json'}")
    loaded = configfile.defaults_from((examples.DRA / "manager-config.yaml").read_text())
    from_config = flags.device_class_mappings(str(loaded.defaults["device_class_mappings"]))
    assert from_json == from_config
    assert from_json.resource_for("h100.example.com") == "example.com/gpu"
    (template,) = documents(examples.DRA / "03-claim-template.yaml")
    (job,) = documents(examples.DRA / "04-job.yaml")
    pod = job["spec"]["template"]
    charged = dra.charge([{"name": "main", "template": pod}], {"h100-x2": template}, from_json)
    assert charged == dra.Charge({"main": {"example.com/gpu": 2}})


def test_the_tas_example_is_valid_and_names_the_bed_levels() -> None:
    """examples/tas: every object parses; the flavor has the Topology on manager and workers;
    the levels are the labels the bed's nodes carry; the gang asks for one of them."""
    (topology,) = documents(examples.TAS / "00-topology.yaml")
    levels = [lv["nodeLabel"] for lv in topology["spec"]["levels"]]
    parse_object(topology)
    node_labels = {
        key
        for cluster in yaml.safe_load(DEFAULT_NODES_FILE.read_text())["clusters"].values()
        for group in cluster
        for key in group["labels"]
    }
    assert set(levels[:-1]) <= node_labels and levels[-1] == "kubernetes.io/hostname"
    for name in ("01-queues.yaml", "02-worker-queues.yaml"):
        objs = by_kind(examples.TAS / name)
        for (kind, _), doc in objs.items():
            if kind != "Namespace":
                parse_object(doc)
        assert objs["ResourceFlavor", "tas-h100"]["spec"]["topologyName"] == "default"
        assert objs["LocalQueue", "tas-lq"]["spec"]["clusterQueue"] == "tas-cq"
    (jobset,) = documents(examples.TAS / "03-jobset-rack.yaml")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"][taspods.REQUIRED_ANNOTATION] in levels
    (job,) = documents(examples.TAS / "04-job-rack.yaml")
    assert job["spec"]["suspend"] is True
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"][taspods.REQUIRED_ANNOTATION] in levels
