"""Shared fixtures: real local control planes (session-scoped, shared between tests that keep
to their own namespaces and uniquely named cluster-scoped objects), per-cluster
kubernetes_asyncio clients, and unique names.

- ``lite_clusters``: manager + 2 workers, etcd + kube-apiserver only (starts in seconds).
- ``kueue_crds``: the lite clusters with kfed's CRDs (``crds/``) installed and served.
- ``full_federation``: opt-in; manager + 3 workers with controller-manager, scheduler and kwok
  fake GPU nodes (worker-1: gpu.model=rtx-a1000, worker-2 and worker-3: gpu.model=h100), and
  on each worker the batch operators JobSet, Kubeflow Trainer, KubeRay, Kubeflow's
  training-operator, the MPI operator and LeaderWorkerSet (the manager has their CRDs only).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from e2e import binaries, waiting
from e2e.local.cluster import LocalCluster
from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from manager.telemetry import tracing

pytest_plugins = ["tests.suite_time", "tests.live_failures"]

# Property tests judge behaviour, never speed: on a machine busy with two test processes
# (or a cold Go build) generating one example can take seconds, which is no failure.
settings.register_profile("kfed", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kfed")

TESTS = Path(__file__).resolve().parent

DEADLINE_SCALE = "2"
"""Every wait's deadline, doubled (e2e/waiting.py): CI on a slow 2-core machine ran the suite
in 66 min where a quicker one takes 28, and tests failed only on 60 s waits for things that
came later. A deadline is never a speed test (benchmarks measure speed); a passing wait ends
when it holds. A value in the environment wins."""
os.environ.setdefault(waiting.DEADLINE_SCALE_ENV, DEADLINE_SCALE)


SESSION_BEDS = ("full_federation", "interop", "single_cluster", "lite_clusters")
"""The beds a test process starts once and shares, in the order a test's group is looked up:
a test that needs the full federation is in its group even if it also uses the lite one."""
SECOND_FEDERATION = frozenset(
    {
        "test_never_twice_never_stuck.py",
        "test_leader_failover.py",
        "test_fenced_runs.py",
        "test_failover.py",
        "test_tas_federation.py",
        # Kinds added on 2026-12-07 (the first run with them: full_federation 1,759 s alone,
        # the suite's longest process; full_federation_b 1,029 s).
        "test_rayjob.py",
        "test_appwrapper.py",
        "test_pods.py",
        # CI on 2026-12-07: full_federation 1,603 s, the run's critical path (pytest 1,617 s),
        # full_federation_b 1,205 s; the drills (~250 s) go over.
        "test_drill.py",
    }
)
"""Modules of tests/integration/federation that get a full federation of their own
(``full_federation_b``), in another test process: the full federation's tests are ~60 % of
the suite's time. With 3 test processes on 2026-12-04: ``full_federation`` 1,211 s,
``full_federation_b`` 1,063 s, everything else 1,369 s, pytest 20 min 34 s. Keep the halves
even when adding slow federation tests (the table at the end of every run tells)."""
HEAVY_FIRST = ("full_federation", "full_federation_b", "interop", "realnode")
"""Groups run first, longest first, so the slowest bed starts at once on a process of its
own and the other process fills in around it."""


def bed_group(item: pytest.Item) -> str:
    """The pytest-xdist group of a test (``make test`` runs ``--dist loadgroup``): the
    session bed it needs, so each bed starts once in one test process; otherwise its module
    (a module-scoped bed starts once) or, for the real node, its package (one machine's
    containerd and host ports, one bed at a time)."""
    names = set(getattr(item, "fixturenames", ()))
    path = Path(item.fspath)
    for bed in SESSION_BEDS:
        if bed in names:
            if bed == "full_federation" and path.name in SECOND_FEDERATION:
                return "full_federation_b"
            return bed
    if (TESTS / "integration" / "realnode") in path.parents:
        return "realnode"
    return str(path.relative_to(TESTS))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (TESTS / "integration") in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)
        item.add_marker(pytest.mark.xdist_group(bed_group(item)))

    def heavy_first(item: pytest.Item) -> int:
        group = bed_group(item)
        return HEAVY_FIRST.index(group) if group in HEAVY_FIRST else len(HEAVY_FIRST)

    items.sort(key=heavy_first)  # stable: the order within a group is kept


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    # Under ``--dist loadgroup`` (pytest-xdist) each test's id carries its group
    # (``...::test_x@full_federation``); without it every test is scheduled alone and every
    # bed starts in every test process, twice the beds on two cores. That happened silently
    # with pytest 9.2 (see pyproject.toml): make it loud, before any test runs.
    if node.config.getvalue("dist") != "loadgroup":
        return
    if ids and not any("@" in nodeid for nodeid in ids):
        pytest.exit(
            "pytest-xdist's loadgroup left every test ungrouped (no id carries an @group): "
            f"pytest {pytest.__version__} and this pytest-xdist do not work together; "
            "install the versions constraints.txt names",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


HANG_MARGIN = 120.0
"""Seconds past a test's own timeout after which its test process is ended, tracebacks
first. pytest-timeout interrupts a test once; when the interrupted test's clean-up then
waits on something that never comes (a task that will not cancel, a process that will not
stop), nothing else would end the run: CI once sat at 99 % until its limit. An ended
process is reported by pytest-xdist as a crashed worker, which it replaces. (A thread of
our own, not faulthandler's timer: pytest cancels that one whenever a test fails.)"""


def _end_hung_process(nodeid: str, seconds: float) -> None:
    stderr = sys.__stderr__
    if stderr is not None:
        stderr.write(f"\n{nodeid}: still running {seconds:.0f} s after it started; ending\n")
        stderr.flush()
        faulthandler.dump_traceback(file=stderr, all_threads=True)
    os._exit(70)


def _timeout_of(item: pytest.Item) -> float:
    """The item's pytest-timeout limit in seconds: its closest marker's, else the ini's."""
    marker = item.get_closest_marker("timeout")
    own = (marker.args[0] if marker.args else marker.kwargs.get("timeout")) if marker else None
    return float(own if own is not None else item.config.getini("timeout") or 0)


BED_START_ALLOWANCE = 600.0
"""Seconds added to the timeout of the first test of each bed group in a test process: its
set-up starts the bed. A full federation starts in ~110 s alone on two cores (its CRDs cost
each kube-apiserver tens of CPU-seconds), and the heavy beds start together: on 2026-12-07
two of them and the interop bed took over 300 s, the per-test timeout, on such a machine."""
_groups_begun: set[str] = set()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # Before pytest-timeout reads the marker (tryfirst: this wrapper's first half runs first).
    # A test's timeout stretches with its waits' deadlines; the first of its bed group in this
    # process also starts the bed.
    group = bed_group(item)
    limit = _timeout_of(item) * waiting.deadline_scale()
    first_of_group = group not in _groups_begun
    _groups_begun.add(group)
    guard = None
    if limit > 0:  # 0: no timeout (``--timeout 0``)
        limit += BED_START_ALLOWANCE if first_of_group else 0
        item.add_marker(pytest.mark.timeout(limit), append=False)
        seconds = limit + HANG_MARGIN
        guard = threading.Timer(seconds, _end_hung_process, args=(item.nodeid, seconds))
        guard.daemon = True
        guard.start()
    try:
        yield
    finally:
        if guard is not None:
            guard.cancel()


def _state_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short and unique per test run, so stray processes are attributable to this run only.
    return tmp_path_factory.mktemp(f"kfed-{os.getpid()}")


def _start(fed: LocalFederation) -> None:
    try:
        binaries.path_of("kube-apiserver")
        for name in fed.operators:
            binaries.operator_path(name)
    except binaries.BinariesMissing as err:
        pytest.fail(
            f"{err}. `make test` builds them; run `make binaries` when calling pytest directly."
        )
    fed.up()


@pytest.fixture(scope="session")
def lite_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    fed = LocalFederation("lite", workers=2, root=_state_root(tmp_path_factory), tie_to_parent=True)
    _start(fed)
    try:
        yield fed
    finally:
        fed.down()


@pytest.fixture(scope="session")
def full_federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    fed = LocalFederation(
        "full",
        workers=3,
        full=True,
        root=_state_root(tmp_path_factory),
        tie_to_parent=True,
        operators=(
            "jobset",
            "trainer",
            "kuberay",
            "training-operator",
            "mpi-operator",
            "lws",
            "appwrapper",
        ),
    )
    _start(fed)
    try:
        yield fed
    finally:
        fed.down()


async def api_client_for(kubeconfig: Path) -> ApiClient:
    return await config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture
async def kube_clients(lite_clusters: LocalFederation) -> AsyncIterator[dict[str, ApiClient]]:
    """One kubernetes_asyncio ApiClient per lite cluster, keyed by cluster name."""
    clients = {c.name: await api_client_for(c.kubeconfig) for c in lite_clusters}
    try:
        yield clients
    finally:
        for client in clients.values():
            await client.close()


@pytest.fixture
async def manager_api(kube_clients: dict[str, ApiClient]) -> ApiClient:
    return kube_clients["manager"]


@pytest.fixture
def unique() -> str:
    """A short suffix that keeps this test's object names apart from other tests'."""
    return uuid.uuid4().hex[:8]


REPO = TESTS.parent
SINGLE_CLUSTER_NODES = TESTS / "data" / "single-cluster-nodes.yaml"


@pytest.fixture(scope="session")
def kueue_crds(lite_clusters: LocalFederation) -> LocalFederation:
    """The lite clusters, with ``crds/`` applied and every kind served."""
    for cluster in lite_clusters:
        install_crds(cluster)
    return lite_clusters


@pytest.fixture(scope="session")
def single_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One full cluster with both GPU models (rtx-a1000 and h100 kwok nodes) and the CRDs:
    the bed for single-cluster (worker shim) tests."""
    fed = LocalFederation(
        "single",
        workers=0,
        full=True,
        nodes_file=SINGLE_CLUSTER_NODES,
        root=_state_root(tmp_path_factory),
        tie_to_parent=True,
    )
    _start(fed)
    try:
        install_crds(fed.cluster("manager"))
        yield fed.cluster("manager")
    finally:
        fed.down()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span kfed records during this test (manager and in-process worker shims
    alike), in memory: one exporter per test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing.use_provider(provider):
        yield exporter
    provider.shutdown()
