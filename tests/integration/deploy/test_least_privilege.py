"""The RBAC of deploy/ is enough, and no more: a federation runs end to end on nothing but
the ServiceAccounts the overlays define.

On the lite manager and worker-1, the RBAC of ``manager/overlays/default`` and
``worker/overlays/default`` is applied for real (into a namespace of this test, every name
prefixed, so nothing is shared with other tests). Then, as real processes started with the
Deployments' own arguments:

- ``python -m manager`` with a kubeconfig of ITS ServiceAccount (leader Lease, shared
  webhook certificate Secret, webhook registration, federation);
- ``python -m worker_shim`` with a kubeconfig of the shim's ServiceAccount;
- the worker registered by ``kfed cluster add`` with the kubeconfig that
  ``deploy/worker/make-kubeconfig.sh`` writes for the manager's ServiceAccount on the worker.

A queued Job submitted on the manager goes through the webhook, is admitted globally,
copied to the worker, admitted there, and its Job is created and started there. Every
process was limited to its role's rules, so each rule the path needs is proven; ``kubectl
auth can-i`` shows a few things each identity may NOT do.

The webhook is registered by URL here (the apiserver of a lite cluster cannot reach a
Service); the in-cluster Service registration uses the same RBAC.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from e2e.local.cluster import LocalCluster
from e2e.local.federation import LocalFederation
from e2e.local.ports import free_ports
from e2e.local.process import ManagedProcess
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.cli.main import main as kfed
from manager.federation.webhooks import webhookconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.resources import Resource
from tests.builders import multikueue_check
from tests.integration.controllers import builders as b
from tests.integration.deploy.manifests import (
    DEPLOY,
    RBAC_KINDS,
    container_args,
    kubectl,
    render_isolated,
)
from tests.integration.eventlog import wait_for_story

pytestmark = pytest.mark.integration

SCRIPT = DEPLOY / "worker" / "make-kubeconfig.sh"
AUTH_READER = "extension-apiserver-authentication-reader"


@dataclass
class Identities:
    """The test's namespace (the same on both clusters: the manager's --namespace names the
    Lease namespace on workers too) and the kubeconfig of each ServiceAccount."""

    namespace: str
    prefix: str
    manager_objects: list[Obj]
    worker_objects: list[Obj]
    kubeconfigs: dict[str, Path] = field(default_factory=dict)


def kubectl_apply(cluster: LocalCluster, objects: list[Obj], *verb: str) -> None:
    cluster.kubectl(*verb, "-f", "-", input=yaml.safe_dump_all(objects))


def make_kubeconfig(cluster: LocalCluster, namespace: str, account: str, out: Path) -> Path:
    made = subprocess.run(
        [
            *("bash", str(SCRIPT), "--kubeconfig", str(cluster.kubeconfig)),
            *("--namespace", namespace, "--service-account", account),
            *("--name", cluster.name, "--duration", "1h", "--output", str(out)),
        ],
        env={**os.environ, "KUBECTL": kubectl()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return out


@pytest.fixture
def identities(kueue_crds: LocalFederation, unique: str, tmp_path: Path) -> Iterator[Identities]:
    namespace, prefix = f"lp-{unique}", f"lp-{unique}-"
    manager, worker = kueue_crds.cluster("manager"), kueue_crds.cluster("worker-1")
    rendered = {
        name: render_isolated(
            DEPLOY / name / "overlays" / "default",
            tmp_path / f"kustomize-{name}",
            namespace=namespace,
            prefix=prefix,
        )
        for name in ("manager", "worker")
    }
    for obj in rendered["manager"]:
        # Rendering moved every namespaced object into the test's namespace; this binding
        # must stay in kube-system, where the base puts it (visibility.yaml).
        if obj["kind"] == "RoleBinding" and obj["roleRef"]["name"] == AUTH_READER:
            obj["metadata"]["namespace"] = "kube-system"
    ids = Identities(namespace, prefix, rendered["manager"], rendered["worker"])
    rbac = {k: [o for o in v if o["kind"] in RBAC_KINDS] for k, v in rendered.items()}
    kubectl_apply(manager, rbac["manager"], "apply")
    kubectl_apply(worker, rbac["worker"], "apply")
    try:
        for cluster, account, key in (
            (manager, "kfed-manager", "manager"),
            (worker, "kfed-worker-shim", "shim"),
            (worker, "kfed-manager-remote", "remote"),
        ):
            ids.kubeconfigs[key] = make_kubeconfig(
                cluster, namespace, prefix + account, tmp_path / f"{key}.kubeconfig"
            )
        yield ids
    finally:
        kubectl_apply(manager, rbac["manager"], "delete", "--wait=false", "--ignore-not-found")
        kubectl_apply(worker, rbac["worker"], "delete", "--wait=false", "--ignore-not-found")


def deployment_argv(objects: list[Obj], name: str, namespace: str, **replace: str) -> list[str]:
    """The Deployment's own arguments, with the in-cluster ones this bed cannot use
    replaced: ``replace`` maps a flag to its new ``--flag=value`` (or "" to drop it)."""
    argv = []
    for arg in container_args(objects, name):
        flag = arg.split("=", 1)[0]
        if flag == "--namespace":
            arg = f"--namespace={namespace}"
        elif flag in replace:
            arg = replace[flag]
        if arg:
            argv.append(arg)
    return argv


@dataclass
class Queues:
    jobs_namespace: str
    check: str
    config: str
    cluster_queue: str
    flavor: str


@pytest.fixture
async def queues(
    kueue_crds: LocalFederation, identities: Identities, unique: str
) -> AsyncIterator[Queues]:
    q = Queues(f"lpjobs-{unique}", f"lp-{unique}", f"lp-{unique}", f"lp-{unique}", f"lp-{unique}")
    manager_cq = b.cluster_queue(q.cluster_queue, q.flavor, gpus=2)
    manager_cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": q.check}]}
    check = multikueue_check(q.check, q.config)
    plan: dict[str, list[tuple[Resource, Obj]]] = {
        "manager": [
            (R.NAMESPACES, {"metadata": {"name": q.jobs_namespace}}),
            (R.ADMISSION_CHECKS, check),
            (R.RESOURCE_FLAVORS, b.flavor(q.flavor, "h100")),
            (R.CLUSTER_QUEUES, manager_cq),
            (R.LOCAL_QUEUES, b.local_queue(q.jobs_namespace, "q", q.cluster_queue)),
        ],
        "worker-1": [
            (R.NAMESPACES, {"metadata": {"name": q.jobs_namespace}}),
            (R.RESOURCE_FLAVORS, b.flavor(q.flavor, "h100")),
            (R.CLUSTER_QUEUES, b.cluster_queue(q.cluster_queue, q.flavor, gpus=2)),
            (R.LOCAL_QUEUES, b.local_queue(q.jobs_namespace, "q", q.cluster_queue)),
        ],
    }
    apis = {c: await KubeApi.from_kubeconfig_file(kueue_crds.kubeconfig(c)) for c in plan}
    try:
        for cluster, objects in plan.items():
            for res, body in objects:
                await apis[cluster].create(res, body, body["metadata"].get("namespace"))
        yield q
    finally:
        for cluster, objects in plan.items():
            for res, body in reversed(objects):
                meta = body["metadata"]
                await apis[cluster].delete(res, meta["name"], meta.get("namespace"))
        with contextlib.suppress(errors.KubeError):
            await apis["manager"].delete(R.MULTIKUEUE_CONFIGS, q.config)
        for api in apis.values():
            await api.close()


def start(role: str, argv: list[str], tmp_path: Path) -> ManagedProcess:
    process = ManagedProcess(
        role=role, argv=argv, log_path=tmp_path / f"{role}.log", tie_to_parent=True
    )
    process.start()
    return process


def cannot(kubeconfig: Path, *question: str) -> bool:
    """``kubectl auth can-i`` says no (exit 1) for this identity."""
    result = subprocess.run(
        [kubectl(), f"--kubeconfig={kubeconfig}", "auth", "can-i", *question],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip() in ("yes", "no"), result.stderr
    return result.stdout.strip() == "no"


async def test_a_federation_runs_on_the_deployed_service_accounts_alone(
    kueue_crds: LocalFederation, identities: Identities, queues: Queues, tmp_path: Path
) -> None:
    ns, prefix = identities.namespace, identities.prefix
    worker_name = f"{prefix}worker-1"
    manager_argv = deployment_argv(
        identities.manager_objects,
        f"{prefix}kfed-manager",
        ns,
        **{
            "--identity": "--identity=least-privilege-manager",
            "--metrics-port": "--metrics-port=0",
            "--webhook-port": "--webhook-port=0",
            "--webhook-service": "--register-webhook-host=127.0.0.1",
            "--visibility-port": f"--visibility-port={free_ports(1)[0]}",
        },
    )
    shim_argv = deployment_argv(
        identities.worker_objects,
        f"{prefix}kfed-worker-shim",
        ns,
        **{"--identity": "--identity=least-privilege-shim", "--metrics-port": "--metrics-port=0"},
    )
    assert "--webhook-cert-secret=kfed-manager-webhook-cert" in manager_argv
    local = ["--metrics-host=127.0.0.1", "--webhook-host=127.0.0.1"]
    processes = [
        start(
            "shim",
            [
                *(sys.executable, "-m", "worker_shim"),
                *("--kubeconfig", str(identities.kubeconfigs["shim"])),
                *shim_argv,
                *local[:1],
            ],
            tmp_path,
        ),
        start(
            "manager",
            [
                *(sys.executable, "-m", "manager"),
                *("--kubeconfig", str(identities.kubeconfigs["manager"])),
                *manager_argv,
                *local,
            ],
            tmp_path,
        ),
    ]
    admin = await KubeApi.from_kubeconfig_file(kueue_crds.kubeconfig("manager"))
    worker_admin = await KubeApi.from_kubeconfig_file(kueue_crds.kubeconfig("worker-1"))
    try:
        added = await asyncio.to_thread(
            CliRunner().invoke,
            kfed,
            [
                *("cluster", "add", worker_name),
                *("--kubeconfig-file", str(identities.kubeconfigs["remote"])),
                *("--config", queues.config, "--timeout", "120s"),
                *("--kubeconfig", str(kueue_crds.kubeconfig("manager")), "--namespace", ns),
            ],
        )
        assert added.exit_code == 0, added.output + _logs(processes)

        async def webhook_registered() -> bool:
            try:
                await admin.get(R.MUTATING_WEBHOOKS, webhookconfig.DEFAULT_CONFIGURATION_NAME)
            except errors.NotFound:
                return False
            return True

        await wait_for(webhook_registered, timeout=60, what="the manager registers its webhook")
        job = await _create_when_webhook_answers(
            admin, b.job(queues.jobs_namespace, "federated", "q", model="h100")
        )
        assert job["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY

        async def running_on_the_worker() -> Obj | None:
            jobs: list[Obj] = (await worker_admin.list(R.JOBS, queues.jobs_namespace))["items"]
            return next((j for j in jobs if not j["spec"].get("suspend")), None)

        remote = await wait_for(
            running_on_the_worker, timeout=120, what="the Job created and started on the worker"
        )
        assert remote is not None
        labels = remote["metadata"]["labels"]
        assert labels[C.MULTIKUEUE_ORIGIN_LABEL] == "multikueue"
        assert all(p.alive for p in processes), _logs(processes)
        # Events are written under the same roles (dropped quietly when refused: so look).
        await wait_for_story(
            admin,
            queues.jobs_namespace,
            "Job",
            "federated",
            ["CreatedWorkload"],
            component="kfed-manager",
        )
        await wait_for_story(
            worker_admin,
            queues.jobs_namespace,
            "Job",
            remote["metadata"]["name"],
            ["Started"],
            component="kfed-worker-shim",
        )
        # The aggregated visibility API started: its settings read, its first callers'
        # SubjectAccessReviews allowed to it (test_visibility_apiservice.py makes them).
        await wait_for(
            lambda: (
                "visibility API for kube-apiserver's aggregation on https://"
                in processes[1].log_path.read_text()
            ),
            timeout=30,
            what="the manager serving the aggregated visibility API",
        )
        for process in processes:
            # A denied request logs "403 Forbidden: ... is forbidden: User ...". Match the
            # word, not the number: "403" turns up in ports and millisecond timestamps.
            log = process.log_path.read_text().lower()
            assert "forbidden" not in log, _logs(processes)
        secret = await admin.get(R.SECRETS, "kfed-manager-webhook-cert", ns)
        assert secret["type"] == "kubernetes.io/tls"

        kc = identities.kubeconfigs
        assert cannot(kc["manager"], "create", "pods", "-n", queues.jobs_namespace)
        assert cannot(kc["manager"], "get", "secrets", "-n", "default")
        assert cannot(kc["manager"], "create", "namespaces")
        assert cannot(kc["remote"], "get", "secrets", "-n", ns)
        assert cannot(kc["remote"], "patch", "workloads.kueue.x-k8s.io", "-A")
        # It creates pods (plain Pods are federated), never reads their logs or execs into them.
        assert cannot(kc["remote"], "get", "pods", "--subresource=log", "-n", queues.jobs_namespace)
        assert cannot(
            kc["remote"], "create", "pods", "--subresource=exec", "-n", queues.jobs_namespace
        )
        assert cannot(kc["shim"], "create", "jobs.batch", "-n", queues.jobs_namespace)
        assert cannot(kc["shim"], "get", "secrets", "-n", ns)

        await asyncio.to_thread(processes[1].stop)  # SIGTERM: hands leadership over at once
        lease = await admin.get(R.LEASES, "kfed-manager-leader", ns)
        assert not lease["spec"].get("holderIdentity"), lease["spec"]
    finally:
        for process in processes:
            await asyncio.to_thread(process.stop)
        with contextlib.suppress(errors.KubeError):
            await webhookconfig.delete_webhook_configuration(admin)
        for api, res, name in (
            (admin, R.MULTIKUEUE_CLUSTERS, worker_name),
            (admin, R.SECRETS, worker_name),
            (admin, R.SECRETS, "kfed-manager-webhook-cert"),
        ):
            with contextlib.suppress(errors.KubeError):
                await api.delete(res, name, ns if res is R.SECRETS else None)
        for res in (R.JOBS, R.WORKLOADS):
            for api in (admin, worker_admin):
                for obj in (await api.list(res, queues.jobs_namespace))["items"]:
                    await api.delete(res, obj["metadata"]["name"], queues.jobs_namespace)
        await admin.close()
        await worker_admin.close()


async def _create_when_webhook_answers(api: KubeApi, job: Obj) -> Obj:
    """The first queued Job may meet the webhook before its queue view has loaded (503,
    retried by the client) or before the apiserver calls it at all (not mutated): create it
    once a dry run comes back mutated."""

    async def mutated() -> bool:
        try:
            probe = await api.request(
                "POST",
                R.JOBS.path(job["metadata"]["namespace"]),
                query={"dryRun": "All"},
                body=job,
            )
        except errors.KubeError:
            return False
        return bool(probe["spec"].get("managedBy") == C.MULTIKUEUE_MANAGED_BY)

    await wait_for(mutated, timeout=60, what="the apiserver calling the manager's webhook")
    return await api.create(R.JOBS, job)


def _logs(processes: list[ManagedProcess]) -> str:
    return "\n".join(f"--- {p.role}\n{p.log_tail(40)}" for p in processes)
