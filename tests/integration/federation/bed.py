"""A live federation for tests: the shared full local clusters (manager + workers), kfed's
CRDs on each, a cuttable proxy between the manager and every worker's apiserver, the
workers registered on the manager, and — per test — in-process worker shims and a manager
with short timeouts."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from e2e.waiting import WaitTimeout, deadline_scale, wait_for
from manager.api import constants as C
from manager.cli.workerobjects import multikueue_cluster
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.federation.runtime import FederationController
from manager.federation.settings import DispatchMode, FailoverPolicy, FederationSettings
from manager.federation.webhooks.admission_webhook import ManagerWebhook
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.telemetry.metrics import Metrics
from tests.conftest import _start
from worker_shim.copies import ManagerCopies
from worker_shim.fencing import Fencing, FencingSettings, ShimMode
from worker_shim.topologyreport import TopologyReport

NAMESPACE = "kueue-system"
CONFIG = "workers"
CHECK = "multikueue"

# Short enough that a failover takes seconds, long enough that a busy machine is no outage:
# with 1 s requests and 3 s leases, CI on a slow 2-core machine (three beds in three test
# processes, load ~10) saw a worker "lost: request timed out" and copies fenced for a lease
# the manager was renewing (2026-12-07; at 2.5 s every worker was still lost now and then),
# and with 1.5 s of grace a busy shim's fence had not landed yet when the manager moved the
# job (the product's default is 4 s). A copy has 10 s to be admitted: at 5 s a busy shim's
# admission came late now and then, the copy was withdrawn and placed again (its DRA
# templates with it), churn that made the loaded machine busier still.
FAST = FederationSettings(
    namespace=NAMESPACE,
    admission_timeout=10.0,
    gc_interval=2.0,
    request_timeout=5.0,
    reconnect_initial=0.2,
    reconnect_max=1.0,
    lease_duration=5.0,
    lease_renew_period=0.5,
    fence_grace=3.0,
    worker_lost_timeout=8.0,
    # Most scenarios measure fast failover; the at-most-once default has its own tests
    # (test_never_twice_never_stuck.py, test_policies.py) that set it.
    failover_policy=FailoverPolicy.FAST,
)
WORKERS_CONNECTED_WAIT = 10.0
"""Seconds a started manager is given to connect to the bed's workers (``Bed.start_manager``)."""
FAST_FENCING = FencingSettings(
    namespace=NAMESPACE, heartbeat_period=0.5, heartbeat_duration=5, check_period=0.1
)
FAST_FENCE_ONLY = dataclasses.replace(FAST_FENCING, mode=ShimMode.FENCE_ONLY, kueue_wait=0.5)
FAST_CONTROLLERS = ControllerSettings(status_period=0.2, requeue_base_seconds=0.2)
FAST_WORKER_CONTROLLERS = ControllerSettings(
    status_period=0.2, requeue_base_seconds=0.2, role="worker"
)


def proxied_kubeconfig(fed: LocalFederation, worker: str, proxy: CuttableProxy) -> str:
    config = yaml.safe_load(fed.kubeconfig(worker).read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    return yaml.safe_dump(config)


@contextlib.contextmanager
def federation_of_its_own(
    fed: LocalFederation,
) -> Iterator[tuple[LocalFederation, dict[str, CuttableProxy]]]:
    """A module's own federation: started, kfed's CRDs on every cluster, a cuttable proxy to
    each worker, the workers registered on the manager; all stopped afterwards."""
    proxies: dict[str, CuttableProxy] = {}
    _start(fed)
    try:
        for cluster in fed:
            install_crds(cluster)
        proxies = {w.name: CuttableProxy(w.ports.apiserver).start() for w in fed.workers}

        async def register() -> None:
            async with await KubeApi.from_kubeconfig_file(fed.kubeconfig("manager")) as api:
                await register_workers(api, fed, proxies)

        asyncio.run(register())
        yield fed, proxies
    finally:
        for proxy in proxies.values():
            proxy.stop()
        fed.down()


async def register_workers(
    api: KubeApi, fed: LocalFederation, proxies: dict[str, CuttableProxy]
) -> None:
    """Secrets, MultiKueueClusters, a MultiKueueConfig and the AdmissionCheck, on the manager."""
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(R.NAMESPACES, {"metadata": {"name": NAMESPACE}})
    for worker, proxy in proxies.items():
        data = base64.b64encode(proxied_kubeconfig(fed, worker, proxy).encode()).decode()
        with contextlib.suppress(errors.AlreadyExists):
            await api.create(
                R.SECRETS,
                {
                    "metadata": {"name": worker, "namespace": NAMESPACE},
                    "data": {"kubeconfig": data},
                },
                NAMESPACE,
            )
        with contextlib.suppress(errors.AlreadyExists):
            await api.create(R.MULTIKUEUE_CLUSTERS, multikueue_cluster(worker, secret=worker))
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(
            R.MULTIKUEUE_CONFIGS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "MultiKueueConfig",
                "metadata": {"name": CONFIG},
                "spec": {"clusters": sorted(proxies)},
            },
        )
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(
            R.ADMISSION_CHECKS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "AdmissionCheck",
                "metadata": {"name": CHECK},
                "spec": {
                    "controllerName": C.MULTIKUEUE_CONTROLLER_NAME,
                    "parameters": {"apiGroup": C.GROUP, "kind": "MultiKueueConfig", "name": CONFIG},
                },
            },
        )


@dataclass
class Bed:
    fed: LocalFederation
    proxies: dict[str, CuttableProxy]
    manager_api: KubeApi
    worker_apis: dict[str, KubeApi]
    settings: FederationSettings = FAST
    manager: FederationController | None = None
    shims: dict[str, ClusterController] = field(default_factory=dict)
    fencing: dict[str, Fencing] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    webhook: ManagerWebhook | None = None

    def _start(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks[name] = asyncio.create_task(coro, name=name)

    async def start_shim(
        self, worker: str, *, fencing: bool = True, topology: bool = False
    ) -> ClusterController:
        """``topology``: with ``--topology-aware-scheduling`` and its report to the managers."""
        api = self.worker_apis[worker]
        settings = dataclasses.replace(FAST_WORKER_CONTROLLERS, topology_aware=topology)
        shim = ClusterController(api, settings)
        self.shims[worker] = shim
        self._start(f"shim/{worker}", shim.run())
        if topology:
            report = TopologyReport(api, shim.state, NAMESPACE, period=0.2)
            self._start(f"topology/{worker}", report.run())
        if fencing:
            fence = Fencing(api, shim.state, FAST_FENCING)
            self.fencing[worker] = fence
            self._start(f"fencing/{worker}", fence.run())
        await asyncio.wait_for(shim.synced.wait(), 30 * deadline_scale())
        return shim

    async def start_fence_only(self, worker: str) -> Fencing:
        """The shim's fence-only side on a worker where upstream Kueue admits: it follows the
        managers' copies there and fences them; it admits nothing."""
        api = self.worker_apis[worker]
        copies = ManagerCopies(api, metrics=Metrics(), component="kfed-worker-shim")
        fence = Fencing(api, copies, FAST_FENCE_ONLY)
        self.fencing[worker] = fence
        self._start(f"copies/{worker}", copies.run())
        self._start(f"fencing/{worker}", fence.run())
        await asyncio.wait_for(copies.workloads.synced.wait(), 30 * deadline_scale())
        return fence

    async def start_federation(self) -> FederationController:
        """A shim on every worker, then the manager: the bed's fast settings throughout."""
        for worker in self.worker_apis:
            await self.start_shim(worker)
        return await self.start_manager()

    async def start_manager(
        self,
        *,
        mode: DispatchMode = DispatchMode.CAPACITY_AWARE,
        identity: str = "test-manager",
        controller: FederationController | None = None,
    ) -> FederationController:
        """Run a manager with the bed's fast settings, or ``controller`` as the test built it
        (e.g. to watch it from before its informers synced)."""
        settings = FederationSettings(
            **{**_fields(self.settings), "dispatch_mode": mode, "manager_identity": identity}
        )
        self.manager = controller or FederationController(
            self.manager_api, settings, FAST_CONTROLLERS
        )
        self._start("manager", self.manager.run())
        await asyncio.wait_for(self.manager.ready.wait(), 30 * deadline_scale())
        await self._workers_connected(self.manager)
        if self.webhook is None:
            self.webhook = ManagerWebhook(self.manager_api, register_url_host="127.0.0.1")
            self._start("webhook", self.webhook.run())
            await asyncio.wait_for(self.webhook.started.wait(), 30 * deadline_scale())
            await wait_for(
                lambda: webhook_called(self.manager_api),
                timeout=60,
                what="the apiserver calling the manager's webhook",
            )
        return self.manager

    async def _workers_connected(self, manager: FederationController) -> None:
        """Until every registered worker of the bed behind an open proxy is connected, for a
        while. ``ready`` means each was tried once; on a busy machine a first try can fail
        (the next follows within a second), and a test's first job would be placed without
        that worker ("not connected"). A barrier, not an assertion: a test whose worker
        cannot connect goes on after the deadline."""

        def connected() -> bool:
            for name, proxy in self.proxies.items():
                entry = manager.registry.clusters.get(name)
                if proxy.mode != "open" or entry is None or entry.remote is None:
                    continue  # cut by the test, or not registered (any more)
                if not entry.remote.connected:
                    return False
            return True

        with contextlib.suppress(WaitTimeout):
            await wait_for(connected, timeout=WORKERS_CONNECTED_WAIT, what="workers connected")

    async def stop(self, name: str) -> None:
        task = self.tasks.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop_all(self) -> None:
        if self.webhook is not None:
            # failurePolicy Fail: never leave it registered without a server behind it.
            await self.webhook.unregister()
            self.webhook = None
        for name in list(self.tasks):
            await self.stop(name)


async def webhook_called(api: KubeApi) -> bool:
    """Does the apiserver call the webhook yet? A freshly written webhook configuration takes
    a moment (longer under load) to reach its admission chain, and a Job created before
    then is never mutated: it keeps no ``managedBy`` and the check rejects it. A dry-run
    queued Job comes back suspended once the webhook answers."""
    probe = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "kfed-webhook-probe", "labels": {C.QUEUE_NAME_LABEL: "probe"}},
        "spec": {
            "suspend": False,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "probe", "image": "busybox"}],
                }
            },
        },
    }
    try:
        created = await api.request(
            "POST", R.JOBS.path("default"), query={"dryRun": "All"}, body=probe
        )
    except errors.KubeError:
        return False  # 503 while its queue view loads: ask again
    return bool(created["spec"].get("suspend"))


def _fields(settings: FederationSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}
