"""The `kfed` CLI against the shared lite clusters (manager + 2 workers, kfed's CRDs).

Tests are synchronous: they call the CLI through click's CliRunner (which runs its own event
loop) and check the clusters with ``Kube``. Every test uses its own kfed namespace for the
worker Secrets and its own MultiKueueCluster/Config names, and removes what it created.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result

from e2e.local.federation import LocalFederation
from manager.cli.main import main
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.resources import Resource

T = TypeVar("T")
Obj = dict[str, Any]

NO_FED_NAMESPACE = {"submit", "workloads", "explain"}
"""Commands without --kfed-namespace (kfed's namespace: they read none)."""


@dataclass
class Kube:
    """Synchronous access to one lite cluster, for arranging and checking."""

    kubeconfig: Path

    def __call__(self, action: Callable[[KubeApi], Awaitable[T]]) -> T:
        async def run() -> T:
            async with await KubeApi.from_kubeconfig_file(self.kubeconfig) as api:
                return await action(api)

        return asyncio.run(run())

    def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj | None:
        async def get(api: KubeApi) -> Obj | None:
            try:
                return await api.get(res, name, namespace)
            except errors.NotFound:
                return None

        return self(get)

    def create(self, res: Resource, body: Obj) -> Obj:
        return self(lambda api: api.create(res, body))

    def patch_status(self, res: Resource, name: str, status: Obj, ns: str | None = None) -> Obj:
        return self(lambda api: api.patch(res, name, {"status": status}, ns, subresource="status"))


@dataclass
class Kfed:
    """Runs `kfed ...` against the lite manager, with this test's kfed namespace."""

    manager_kubeconfig: Path
    namespace: str

    def __call__(self, *args: str, input: str | None = None) -> Result:
        extra = ["--kubeconfig", str(self.manager_kubeconfig)]
        if args[0] not in NO_FED_NAMESPACE:
            extra += ["--kfed-namespace", self.namespace]
        return CliRunner().invoke(main, [*args, *extra], input=input, prog_name="kfed")


@dataclass
class Cleanup:
    """Objects to delete at the end of the test, newest first."""

    items: list[tuple[Kube, Resource, str, str | None]] = field(default_factory=list)

    def add(self, kube: Kube, res: Resource, name: str, namespace: str | None = None) -> None:
        self.items.append((kube, res, name, namespace))

    def run(self) -> None:
        for kube, res, name, namespace in reversed(self.items):
            with contextlib.suppress(errors.KubeError):
                kube(_deleter(res, name, namespace))


def _deleter(
    res: Resource, name: str, namespace: str | None
) -> Callable[[KubeApi], Awaitable[bool]]:
    async def delete(api: KubeApi) -> bool:
        return await api.delete(res, name, namespace)

    return delete


@pytest.fixture
def manager(kueue_crds: LocalFederation) -> Kube:
    return Kube(kueue_crds.kubeconfig("manager"))


@pytest.fixture
def workers(kueue_crds: LocalFederation) -> dict[str, Kube]:
    return {w.name: Kube(w.kubeconfig) for w in kueue_crds.workers}


@pytest.fixture
def cleanup() -> Iterator[Cleanup]:
    pending = Cleanup()
    try:
        yield pending
    finally:
        pending.run()


@pytest.fixture
def kfed(kueue_crds: LocalFederation, manager: Kube, unique: str, cleanup: Cleanup) -> Kfed:
    """The CLI, with a kfed namespace of this test's own (deleted at the end)."""
    namespace = f"kfed-cli-{unique}"
    cleanup.add(manager, R.NAMESPACES, namespace)
    return Kfed(kueue_crds.kubeconfig("manager"), namespace)


def namespace(kube: Kube, cleanup: Cleanup, name: str) -> str:
    kube.create(R.NAMESPACES, {"metadata": {"name": name}})
    cleanup.add(kube, R.NAMESPACES, name)
    return name
