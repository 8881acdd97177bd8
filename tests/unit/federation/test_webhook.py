"""The manager's Job webhook: queued Jobs are suspended, Jobs of MultiKueue queues also get
``managedBy``, everything else passes untouched; AdmissionReview in and out over TLS; the
webhook configuration's shape."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from kubernetes_asyncio.client import ApiClient

from manager.api.constants import (
    MULTIKUEUE_CONTROLLER_NAME,
    MULTIKUEUE_MANAGED_BY,
    PREBUILT_WORKLOAD_LABEL,
    QUEUE_NAME_LABEL,
)
from manager.controllers.state import ClusterState
from manager.federation.webhooks import certs, webhookconfig
from manager.federation.webhooks.webhook import (
    NOT_READY_MESSAGE,
    ClusterStateQueues,
    Verdict,
    WebhookServer,
    review_job,
    review_response,
    webhook_app,
)
from manager.kube.api import KubeApi

Obj = dict[str, Any]
MK_QUEUES = {("team-a", "gpu-mk")}


def uses_multikueue(namespace: str, queue_name: str) -> bool | None:
    if queue_name == "later":
        return None  # not created yet
    return (namespace, queue_name) in MK_QUEUES


def job(queue: str | None = "gpu-mk", **spec: Any) -> Obj:
    labels = {QUEUE_NAME_LABEL: queue} if queue is not None else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "labels": labels},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec},
    }


def request(obj: Any, *, namespace: str = "team-a", operation: str = "CREATE") -> Obj:
    return {
        "uid": "0f6b-uid",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "namespace": namespace,
        "operation": operation,
        "object": obj,
    }


def admission_review(req: Obj) -> Obj:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def applied(obj: Obj, patch: list[Obj]) -> Obj:
    """Apply the JSONPatch "add" operations the webhook emits (object members only)."""
    result = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "add"
        *parents, last = op["path"].lstrip("/").split("/")
        node = result
        for part in parents:
            node = node[part]
        node[last] = op["value"]
    return result


class Lookup:
    """A QueueLookup for tests: fixed MultiKueue queues, readiness switchable."""

    def __init__(self, *, ready: bool = True) -> None:
        self.is_ready = ready

    def ready(self) -> bool:
        return self.is_ready

    def uses_multikueue(self, namespace: str, queue_name: str) -> bool | None:
        return uses_multikueue(namespace, queue_name)


# -- the decision ---------------------------------------------------------------------------


def test_a_job_in_a_multikueue_queue_is_suspended_and_managed_by_multikueue() -> None:
    verdict = review_job(request(job()), uses_multikueue)

    assert verdict.allowed
    spec = applied(job(), verdict.patch)["spec"]
    assert spec["managedBy"] == MULTIKUEUE_MANAGED_BY
    assert spec["suspend"] is True


def test_a_job_in_a_plain_queue_is_only_suspended() -> None:
    verdict = review_job(request(job("plain")), uses_multikueue)

    assert verdict.allowed
    assert verdict.patch == [{"op": "add", "path": "/spec/suspend", "value": True}]


def test_the_same_queue_name_in_another_namespace_is_another_queue() -> None:
    verdict = review_job(request(job(), namespace="team-b"), uses_multikueue)

    assert "managedBy" not in applied(job(), verdict.patch)["spec"]


def test_a_job_without_the_queue_label_is_untouched() -> None:
    assert review_job(request(job(None)), uses_multikueue) == Verdict(allowed=True)


def test_an_empty_queue_label_means_no_queue() -> None:
    assert review_job(request(job("")), uses_multikueue) == Verdict(allowed=True)


def test_an_already_suspended_job_gets_only_managed_by() -> None:
    verdict = review_job(request(job(suspend=True)), uses_multikueue)

    assert verdict.patch == [
        {"op": "add", "path": "/spec/managedBy", "value": MULTIKUEUE_MANAGED_BY}
    ]


def test_a_job_already_managed_by_multikueue_needs_no_patch() -> None:
    verdict = review_job(
        request(job(suspend=True, managedBy=MULTIKUEUE_MANAGED_BY)), uses_multikueue
    )

    assert verdict == Verdict(allowed=True)


def test_another_controllers_managed_by_is_left_alone() -> None:
    verdict = review_job(request(job(managedBy="example.com/my-controller")), uses_multikueue)

    spec = applied(job(managedBy="example.com/my-controller"), verdict.patch)["spec"]
    assert spec["managedBy"] == "example.com/my-controller"
    assert spec["suspend"] is True


def test_the_built_in_job_controller_name_counts_as_unset_as_upstream() -> None:
    verdict = review_job(request(job(managedBy="kubernetes.io/job-controller")), uses_multikueue)

    spec = applied(job(), verdict.patch)["spec"]
    assert spec["managedBy"] == MULTIKUEUE_MANAGED_BY


def test_the_namespace_falls_back_to_the_objects_own() -> None:
    obj = job()
    obj["metadata"]["namespace"] = "team-a"
    req = request(obj)
    del req["namespace"]

    verdict = review_job(req, uses_multikueue)

    assert applied(obj, verdict.patch)["spec"]["managedBy"] == MULTIKUEUE_MANAGED_BY


def test_before_the_queue_view_is_loaded_a_queued_job_is_refused_with_retry() -> None:
    verdict = review_job(request(job("plain")), uses_multikueue, ready=False)

    assert not verdict.allowed
    assert verdict.patch == []
    assert "kfed manager not ready, retry" in verdict.message
    assert verdict.code == 503


def test_before_the_queue_view_is_loaded_a_job_without_queue_still_passes() -> None:
    assert review_job(request(job(None)), uses_multikueue, ready=False) == Verdict(allowed=True)


def test_the_lookup_is_not_consulted_for_jobs_without_a_queue() -> None:
    def boom(namespace: str, queue_name: str) -> bool:
        raise AssertionError("looked up a queue for a Job without one")

    assert review_job(request(job(None)), boom).allowed


@pytest.mark.parametrize(
    ("req", "problem"),
    [
        (
            {**request(job()), "kind": {"group": "", "version": "v1", "kind": "Secret"}},
            "batch/v1 Job",
        ),
        ({**request(job()), "kind": "Job"}, "batch/v1 Job"),
        (request(job(), operation="DELETE"), "only CREATE and UPDATE"),
        (request(None), "no Job object"),
        (request("a string"), "no Job object"),
        (request({**job(), "spec": None}), "no spec"),
        (request(job(), namespace=""), "no namespace"),
        (request({**job(), "metadata": {"labels": {QUEUE_NAME_LABEL: 7}}}), "not a string"),
    ],
    ids=[
        "other-kind",
        "kind-not-object",
        "delete",
        "no-object",
        "object-not-map",
        "no-spec",
        "no-namespace",
        "label-not-string",
    ],
)
def test_a_malformed_request_is_allowed_unchanged_with_a_warning(req: Obj, problem: str) -> None:
    verdict = review_job(req, uses_multikueue, ready=False)

    assert verdict.allowed
    assert verdict.patch == []
    assert len(verdict.warnings) == 1
    assert problem in verdict.warnings[0]


def test_labels_that_are_not_a_map_mean_no_queue() -> None:
    assert review_job(request({**job(), "metadata": {"labels": "x"}}), uses_multikueue).allowed


# -- the AdmissionReview ----------------------------------------------------------------------


def test_the_response_echoes_the_uid_and_carries_a_base64_json_patch() -> None:
    verdict = review_job(request(job()), uses_multikueue)

    answer = review_response(admission_review(request(job())), verdict)

    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "0f6b-uid"
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == verdict.patch
    assert "status" not in response


def test_a_response_without_patch_has_no_patch_type() -> None:
    answer = review_response(admission_review(request(job(None))), Verdict(allowed=True))

    assert answer["response"] == {"uid": "0f6b-uid", "allowed": True}


def test_a_refusal_carries_a_status_with_the_message() -> None:
    verdict = review_job(request(job()), uses_multikueue, ready=False)

    response = review_response(admission_review(request(job())), verdict)["response"]

    assert response["allowed"] is False
    assert response["status"] == {
        "code": 503,
        "reason": "ServiceUnavailable",
        "message": NOT_READY_MESSAGE,
        "details": {"retryAfterSeconds": 1},
    }


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], Lookup]]:
    lookup = Lookup()
    async with TestClient(TestServer(webhook_app(lookup))) as test_client:
        yield test_client, lookup


async def post_review(client: TestClient[Any, Any], body: Any) -> Obj:
    response = await client.post("/mutate-batch-v1-job", json=body)
    assert response.status == 200
    answer: Obj = await response.json()
    return answer


async def test_round_trip_over_http(client: tuple[TestClient[Any, Any], Lookup]) -> None:
    answer = await post_review(client[0], admission_review(request(job())))

    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert applied(job(), patch)["spec"]["managedBy"] == MULTIKUEUE_MANAGED_BY


async def test_not_ready_over_http(client: tuple[TestClient[Any, Any], Lookup]) -> None:
    test_client, lookup = client
    lookup.is_ready = False

    queued = await post_review(test_client, admission_review(request(job())))
    unqueued = await post_review(test_client, admission_review(request(job(None))))

    assert queued["response"]["allowed"] is False
    assert unqueued["response"] == {"uid": "0f6b-uid", "allowed": True}
    assert (await test_client.get("/readyz")).status == 503
    assert (await test_client.get("/healthz")).status == 200


@pytest.mark.parametrize("body", [{"kind": "AdmissionReview"}, [1, 2], {"request": "x"}])
async def test_json_that_is_no_review_is_allowed_with_a_warning(
    client: tuple[TestClient[Any, Any], Lookup], body: Any
) -> None:
    answer = await post_review(client[0], body)

    assert answer["response"]["allowed"] is True
    assert answer["response"]["uid"] == ""
    assert answer["response"]["warnings"]


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe"])
async def test_an_unreadable_body_is_a_400(
    client: tuple[TestClient[Any, Any], Lookup], raw: bytes
) -> None:
    response = await client[0].post("/mutate-batch-v1-job", data=raw)

    assert response.status == 400
    assert "unreadable" in (await response.json())["message"]


async def test_health_and_readiness(client: tuple[TestClient[Any, Any], Lookup]) -> None:
    assert (await client[0].get("/healthz")).status == 200
    assert (await client[0].get("/readyz")).status == 200


# -- the lookup over ClusterState -------------------------------------------------------------


def cluster_state() -> ClusterState:
    # The informers are never run here: their caches are filled by hand.
    return ClusterState(KubeApi(cast(ApiClient, object()), name="unit"))


def put(state: ClusterState, informer: str, key: str, obj: Obj) -> None:
    getattr(state, informer).cache[key] = obj


def test_cluster_state_lookup_follows_local_queue_to_a_multikueue_check() -> None:
    state = cluster_state()
    put(state, "local_queues", "team-a/gpu-mk", {"spec": {"clusterQueue": "mk-cq"}})
    put(state, "local_queues", "team-a/plain", {"spec": {"clusterQueue": "plain-cq"}})
    put(state, "local_queues", "team-a/other", {"spec": {"clusterQueue": "other-cq"}})
    put(state, "local_queues", "team-a/dangling", {"spec": {"clusterQueue": "missing-cq"}})
    put(state, "cluster_queues", "mk-cq", cq("mk-cq", ["prov", "mk"]))
    put(state, "cluster_queues", "plain-cq", cq("plain-cq", []))
    put(state, "cluster_queues", "other-cq", cq("other-cq", ["prov", "gone"]))
    put(state, "admission_checks", "mk", {"spec": {"controllerName": MULTIKUEUE_CONTROLLER_NAME}})
    put(state, "admission_checks", "prov", {"spec": {"controllerName": "example.com/prov"}})
    lookup = ClusterStateQueues(state)

    assert lookup.uses_multikueue("team-a", "gpu-mk")
    assert not lookup.uses_multikueue("team-a", "plain")
    assert not lookup.uses_multikueue("team-a", "other")
    assert not lookup.uses_multikueue("team-a", "dangling")
    assert not lookup.uses_multikueue("team-a", "no-such-queue")
    assert not lookup.uses_multikueue("team-b", "gpu-mk")


def cq(name: str, checks: list[str]) -> Obj:
    strategy = {"admissionChecks": [{"name": c} for c in checks]}
    return {"metadata": {"name": name}, "spec": {"admissionChecksStrategy": strategy}}


def test_cluster_state_lookup_is_ready_once_its_three_informers_listed() -> None:
    state = cluster_state()
    lookup = ClusterStateQueues(state)
    assert not lookup.ready()

    for informer in lookup.informers[:-1]:
        informer.synced.set()
    assert not lookup.ready()

    lookup.informers[-1].synced.set()
    assert lookup.ready()


# -- TLS ------------------------------------------------------------------------------------


def test_the_serving_certificate_is_signed_by_the_ca_for_every_host() -> None:
    generated = certs.generate_serving_certificate(["127.0.0.1", "kfed.kueue-system.svc"])

    ca = x509.load_pem_x509_certificate(generated.ca_bundle)
    cert = x509.load_pem_x509_certificate(generated.cert_pem)
    cert.verify_directly_issued_by(ca)
    alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in alt.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert alt.get_values_for_type(x509.DNSName) == ["kfed.kueue-system.svc"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_before_utc < dt.datetime.now(dt.UTC) < cert.not_valid_after_utc
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)


def test_a_serving_certificate_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        certs.generate_serving_certificate([])


def test_written_files_use_tls_secret_names_and_a_private_key_mode(tmp_path: Path) -> None:
    bundle = certs.write_serving_certificate(tmp_path / "certs", ["localhost"])

    directory = tmp_path / "certs"
    assert (directory / "ca.crt").read_bytes() == bundle
    assert (directory / "tls.crt").read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    assert (directory / "tls.key").stat().st_mode & 0o777 == 0o600


async def test_the_server_answers_over_tls_to_a_client_trusting_the_ca(tmp_path: Path) -> None:
    ca_bundle = certs.write_serving_certificate(tmp_path, ["127.0.0.1"])
    trusting = ssl.create_default_context(cadata=ca_bundle.decode())

    async with (
        WebhookServer(Lookup(), "127.0.0.1", 0, tmp_path) as server,
        aiohttp.ClientSession() as session,
    ):
        assert server.port != 0
        assert server.url == f"https://127.0.0.1:{server.port}/mutate-batch-v1-job"
        async with session.post(
            server.url, json=admission_review(request(job())), ssl=trusting
        ) as response:
            answer = await response.json()
        async with session.get(f"https://127.0.0.1:{server.port}/healthz", ssl=trusting) as health:
            assert health.status == 200
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.get(f"https://127.0.0.1:{server.port}/healthz")  # system CAs only

    assert answer["response"]["patchType"] == "JSONPatch"


async def test_the_server_stops_and_frees_its_port(tmp_path: Path) -> None:
    certs.write_serving_certificate(tmp_path, ["127.0.0.1"])
    server = WebhookServer(Lookup(), "127.0.0.1", 0, tmp_path)
    await server.start()
    with pytest.raises(RuntimeError, match="already running"):
        await server.start()
    await server.stop()
    await server.stop()  # stopping twice is harmless

    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(f"https://127.0.0.1:{server.port}/healthz", ssl=False)


# -- the webhook configuration --------------------------------------------------------------


def test_the_configuration_sends_only_queued_job_creations_and_fails_closed() -> None:
    config = webhookconfig.webhook_configuration(
        url="https://127.0.0.1:9443/mutate-batch-v1-job", ca_bundle=b"PEM"
    )

    assert config["kind"] == "MutatingWebhookConfiguration"
    assert config["metadata"]["name"] == "kfed-manager"
    [hook, update] = config["webhooks"]
    assert hook["name"] == "mjob.kfed.io"
    assert update["name"] == "ujob.kfed.io"
    assert update["rules"][0]["operations"] == ["UPDATE"]
    assert update["failurePolicy"] == "Ignore", "kfed's own Job updates never depend on it"
    assert update["clientConfig"] == hook["clientConfig"]
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [group],
            "apiVersions": [version],
            "resources": [plural],
            "scope": "Namespaced",
        }
        for group, version, plural in (
            ("batch", "v1", "jobs"),
            ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
            ("ray.io", "v1", "rayclusters"),
            ("ray.io", "v1", "rayjobs"),
            ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
            ("kubeflow.org", "v1", "pytorchjobs"),
            ("kubeflow.org", "v2beta1", "mpijobs"),
            ("kubeflow.org", "v1", "tfjobs"),
            ("kubeflow.org", "v1", "xgboostjobs"),
            ("kubeflow.org", "v1", "paddlejobs"),
            ("kubeflow.org", "v1", "jaxjobs"),
            ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
            ("workload.codeflare.dev", "v1beta2", "appwrappers"),
            ("apps", "v1", "statefulsets"),
            ("apps", "v1", "deployments"),
            ("", "v1", "pods"),
        )
    ]
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": QUEUE_NAME_LABEL, "operator": "Exists"}]
    }
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["timeoutSeconds"] == 5
    assert hook["clientConfig"] == {
        "caBundle": base64.b64encode(b"PEM").decode(),
        "url": "https://127.0.0.1:9443/mutate-batch-v1-job",
    }


def test_the_configuration_can_point_at_a_service() -> None:
    config = webhookconfig.webhook_configuration(
        service=webhookconfig.ServiceReference("kueue-system", "kfed-manager", port=9443),
        ca_bundle=b"PEM",
    )

    assert config["webhooks"][0]["clientConfig"]["service"] == {
        "namespace": "kueue-system",
        "name": "kfed-manager",
        "port": 9443,
        "path": "/mutate-batch-v1-job",
    }


@pytest.mark.parametrize(
    "where",
    [{}, {"url": "https://x/", "service": webhookconfig.ServiceReference("ns", "svc")}],
    ids=["neither", "both"],
)
def test_the_configuration_needs_exactly_one_destination(where: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        webhookconfig.webhook_configuration(ca_bundle=b"PEM", **where)


def test_the_configuration_needs_a_ca_bundle() -> None:
    with pytest.raises(ValueError, match="ca_bundle"):
        webhookconfig.webhook_configuration(url="https://x/", ca_bundle=b"")


# -- refusals (issue "Never twice, never stuck", findings 1 and 9) ---------------------------


def test_a_multikueue_managed_job_in_a_queue_without_the_check_is_refused() -> None:
    """Finding 9: it would hold that queue's quota forever without running anywhere."""
    verdict = review_job(request(job("cpu-only", managedBy=MULTIKUEUE_MANAGED_BY)), uses_multikueue)
    assert not verdict.allowed and verdict.code == 403
    assert "team-a/cpu-only" in verdict.message and "nothing would ever run" in verdict.message


def test_a_multikueue_managed_job_whose_queue_is_not_known_yet_is_allowed() -> None:
    """Its queue may be created after it (GitOps order): it waits for the queue, suspended."""
    verdict = review_job(request(job("later", managedBy=MULTIKUEUE_MANAGED_BY)), lambda ns, q: None)
    assert verdict.allowed


def update(new: Obj, old: Obj) -> Obj:
    return {**request(new, operation="UPDATE"), "oldObject": old}


def test_adding_a_queue_to_a_running_job_is_refused_as_upstream_refuses_it() -> None:
    """Finding 1: a running Job labelled with a queue afterwards would be queued and, on a
    federation, run a second time on a worker."""
    verdict = review_job(
        update(job("gpu-mk", suspend=False), job(None, suspend=False)), uses_multikueue
    )
    assert not verdict.allowed
    assert "must not update queue name when job is unsuspend" in verdict.message
    assert QUEUE_NAME_LABEL in verdict.message


def test_changing_the_prebuilt_workload_of_a_running_job_is_refused() -> None:
    old = job("gpu-mk", suspend=False)
    new = job("gpu-mk", suspend=False)
    new["metadata"]["labels"][PREBUILT_WORKLOAD_LABEL] = "other"
    verdict = review_job(update(new, old), uses_multikueue)
    assert not verdict.allowed and "prebuilt workload name" in verdict.message


MK = {"managedBy": MULTIKUEUE_MANAGED_BY}


@pytest.mark.parametrize(
    ("new", "old"),
    [
        (job("gpu-mk", suspend=True, **MK), job(None, suspend=True, **MK)),  # queued, suspended
        (job("cpu-only", suspend=True), job(None, suspend=True)),  # queued on the manager
        (job("gpu-mk", suspend=False), job("gpu-mk", suspend=True)),  # kfed starting it
        (job(None, suspend=True), job("gpu-mk", suspend=True)),  # taken out of its queue
        (job("later", suspend=True, **MK), job(None, suspend=True, **MK)),  # queue not known
    ],
    ids=[
        "queue-added-while-suspended",
        "queue-added-to-a-plain-job",
        "unsuspended-same-queue",
        "queue-removed-suspended",
        "queue-not-known-yet",
    ],
)
def test_updates_upstream_allows_pass_unchanged(new: Obj, old: Obj) -> None:
    assert review_job(update(new, old), uses_multikueue) == Verdict(allowed=True)


def test_a_multikueue_job_labelled_afterwards_with_a_plain_queue_is_refused() -> None:
    """Issue "Never stuck", item 1: created suspended with managedBy MultiKueue and no queue
    (the creation webhook never saw it), then labelled with a queue that has no MultiKueue
    check. Before: accepted, admitted there, unsuspended, run by nothing, quota held for ever."""
    verdict = review_job(
        update(job("cpu-only", suspend=True, **MK), job(None, suspend=True, **MK)), uses_multikueue
    )
    assert not verdict.allowed and verdict.code == 403
    assert "team-a/cpu-only" in verdict.message and "nothing would ever run" in verdict.message
    assert "spec.managedBy cannot change" in verdict.message


def test_a_plain_job_moved_to_a_federated_queue_is_refused() -> None:
    """Issue "Never stuck", item 2: its managedBy cannot be set any more, so in a federated
    queue it would be rejected by the check after taking quota; say so at once."""
    verdict = review_job(
        update(job("gpu-mk", suspend=True), job("cpu-only", suspend=True)), uses_multikueue
    )
    assert not verdict.allowed
    assert "team-a/gpu-mk" in verdict.message and "submit it again" in verdict.message


@pytest.mark.parametrize(
    ("group", "version", "kind", "own_controller"),
    [
        ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobset.sigs.k8s.io/jobset-controller"),
        ("ray.io", "v1", "RayCluster", "ray.io/kuberay-operator"),
    ],
)
@pytest.mark.parametrize("managed_by", [None, "own"])
def test_every_kind_of_job_is_suspended_and_given_to_multikueue_as_upstream_does(
    group: str, version: str, kind: str, own_controller: str, managed_by: str | None
) -> None:
    """A JobSet or RayCluster created in a federated queue is suspended at once (its own
    operator must not start it on the manager) and its managedBy, unset or naming its own
    controller, becomes MultiKueue's."""
    obj = job()
    obj["spec"].pop("suspend", None)
    if managed_by is not None:
        obj["spec"]["managedBy"] = own_controller
    req = {**request(obj), "kind": {"group": group, "version": version, "kind": kind}}
    verdict = review_job(req, lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/managedBy", "value": MULTIKUEUE_MANAGED_BY},
    ]
