"""`kfed cluster add` leaves nothing behind when the worker is refused or a step fails: what it
created is deleted, what it changed is put back, what was there before is never deleted.
Against an in-memory API server (the same run against a real one: tests/integration/cli)."""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.cli import cluster, registration
from manager.cli.common import EXIT_FAILED, CliError
from manager.cli.rollback import Rollback, rollback_summary
from manager.cli.target import Target
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.resources import Resource

Obj = dict[str, Any]
NS = "kueue-system"
CA = base64.b64encode(b"ca").decode()


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class MemoryApi:
    """Just enough of KubeApi for registration: objects by (plural, namespace, name), uids,
    resourceVersions and their preconditions, and failures to inject by (verb, plural)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.fail: dict[tuple[str, str], errors.KubeError] = {}
        self._versions = itertools.count(1)

    def _key(self, res: Resource, name: str, namespace: str | None) -> tuple[str, str | None, str]:
        return (res.plural, namespace if res.namespaced else None, name)

    def _check(self, verb: str, res: Resource) -> None:
        if (verb, res.plural) in self.fail:
            raise self.fail[(verb, res.plural)]

    def _stamp(self, obj: Obj) -> Obj:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(obj)

    def put(self, res: Resource, obj: Obj) -> None:
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}-old")
        key = self._key(res, obj["metadata"]["name"], obj["metadata"].get("namespace"))
        self.objects[key] = obj
        self._stamp(obj)

    def state(self) -> dict[tuple[str, str | None, str], Obj]:
        """Every object without its resourceVersion (which any write changes)."""
        out = copy.deepcopy(self.objects)
        for obj in out.values():
            obj["metadata"].pop("resourceVersion", None)
        return out

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        self._check("get", res)
        try:
            return copy.deepcopy(self.objects[self._key(res, name, namespace)])
        except KeyError:
            raise errors.NotFound(404, "NotFound", f"{res.plural} {name} not found") from None

    async def list(self, res: Resource, namespace: str | None = None) -> Obj:
        self._check("list", res)
        items = [
            copy.deepcopy(o)
            for (plural, ns, _), o in self.objects.items()
            if plural == res.plural and (namespace is None or ns == namespace)
        ]
        return {"items": items}

    async def create(self, res: Resource, body: Obj, namespace: str | None = None) -> Obj:
        self._check("create", res)
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        if res.namespaced:
            meta["namespace"] = namespace or meta.get("namespace")
        key = self._key(res, meta["name"], meta.get("namespace"))
        if key in self.objects:
            raise errors.AlreadyExists(409, "AlreadyExists", f"{meta['name']} exists")
        meta["uid"] = f"uid-{meta['name']}-{next(self._versions)}"
        self.objects[key] = obj
        return self._stamp(obj)

    def _write(self, res: Resource, obj: Obj, version: str | None) -> Obj:
        key = self._key(res, obj["metadata"]["name"], obj["metadata"].get("namespace"))
        current = self.objects.get(key)
        if current is None:
            raise errors.NotFound(404, "NotFound", "gone")
        if version and version != current["metadata"]["resourceVersion"]:
            raise errors.Conflict(409, "Conflict", "the object has been modified")
        self.objects[key] = obj
        return self._stamp(obj)

    async def patch(
        self, res: Resource, name: str, patch: Obj, namespace: str | None = None
    ) -> Obj:
        self._check("patch", res)
        current = await self.get(res, name, namespace)
        version = (patch.get("metadata") or {}).get("resourceVersion")
        return self._write(res, merge(current, patch), version)

    async def replace(self, res: Resource, body: Obj) -> Obj:
        self._check("replace", res)
        return self._write(res, copy.deepcopy(body), body["metadata"].get("resourceVersion"))

    async def delete(
        self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None
    ) -> bool:
        self._check("delete", res)
        key = self._key(res, name, namespace)
        if key not in self.objects:
            return False
        if uid and self.objects[key]["metadata"]["uid"] != uid:
            raise errors.Conflict(409, "Conflict", "uid precondition failed")
        del self.objects[key]
        return True

    async def close(self) -> None:
        pass


def worker_kubeconfig(server: str = "https://10.0.0.1:6443", token: str = "t1") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "w",
            "clusters": [
                {"name": "w", "cluster": {"server": server, "certificate-authority-data": CA}}
            ],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
        }
    )


def checked(server: str = "https://10.0.0.1:6443") -> kubeconfig.CheckedKubeconfig:
    return kubeconfig.check(worker_kubeconfig(server))


def config_obj(name: str, clusters: list[str]) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "MultiKueueConfig",
        "metadata": {"name": name},
        "spec": {"clusters": clusters},
    }


async def register(api: MemoryApi, rollback: Rollback, **kw: Any) -> list[str]:
    return await registration.register(
        api,  # type: ignore[arg-type]
        kw.pop("name", "w1"),
        kw.pop("checked", checked()),
        namespace=kw.pop("namespace", NS),
        config=kw.pop("config", "workers"),
        rollback=rollback,
    )


async def test_a_new_worker_is_rolled_back_to_nothing() -> None:
    api, rollback = MemoryApi(), Rollback()

    done = await register(api, rollback)
    assert done[:4] == [
        f"created Namespace {NS}",
        f"created Secret {NS}/w1",
        "created MultiKueueCluster w1",
        "created MultiKueueConfig workers with w1",
    ]
    undone, failed = await rollback.run()

    assert failed == []
    assert undone == [
        "deleted MultiKueueConfig workers",
        "deleted MultiKueueCluster w1",
        f"deleted Secret {NS}/w1",
        f"deleted Namespace {NS}",
    ]
    assert api.objects == {}
    assert await rollback.run() == ([], []), "each change is undone once"


async def test_what_existed_before_is_put_back_never_deleted() -> None:
    api, rollback = MemoryApi(), Rollback()
    api.put(R.NAMESPACES, {"metadata": {"name": NS}})
    old_text = worker_kubeconfig("https://10.0.0.9:6443", token="old")
    api.put(
        R.SECRETS,
        {
            "metadata": {"name": "w1", "namespace": NS, "labels": {"team": "a"}},
            "data": {
                C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: base64.b64encode(old_text.encode()).decode()
            },
        },
    )
    api.put(
        R.MULTIKUEUE_CLUSTERS,
        {
            "apiVersion": C.API_VERSION,
            "kind": "MultiKueueCluster",
            "metadata": {"name": "w1"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "old-secret"}}},
            "status": {"conditions": []},
        },
    )
    api.put(R.MULTIKUEUE_CONFIGS, config_obj("workers", ["w0"]))
    before = api.state()

    done = await register(api, rollback)
    assert done[:3] == [
        f"updated Secret {NS}/w1",
        "updated MultiKueueCluster w1",
        "MultiKueueConfig workers: w0, w1",
    ]
    assert api.state() != before
    undone, failed = await rollback.run()

    assert failed == []
    assert undone == [
        "took w1 out of MultiKueueConfig workers",
        "restored MultiKueueCluster w1 as it was",
        f"restored Secret {NS}/w1 as it was",
    ]
    assert api.state() == before


async def test_re_adding_a_registered_worker_unchanged_undoes_nothing() -> None:
    api = MemoryApi()
    await register(api, Rollback())
    before = api.state()
    rollback = Rollback()

    done = await register(api, rollback)

    assert done[:3] == [
        f"Secret {NS}/w1 unchanged",
        "MultiKueueCluster w1 unchanged",
        "MultiKueueConfig workers unchanged",
    ]
    assert await rollback.run() == ([], [])
    assert api.state() == before


async def test_a_failure_midway_undoes_the_steps_already_made() -> None:
    api, rollback = MemoryApi(), Rollback()
    api.fail[("create", R.MULTIKUEUE_CONFIGS.plural)] = errors.Forbidden(
        403, "Forbidden", "cannot create multikueueconfigs"
    )

    with pytest.raises(errors.Forbidden):
        await register(api, rollback)
    undone, failed = await rollback.run()

    assert failed == []
    assert undone == [
        "deleted MultiKueueCluster w1",
        f"deleted Secret {NS}/w1",
        f"deleted Namespace {NS}",
    ]
    assert api.objects == {}


async def test_what_others_changed_meanwhile_is_kept_and_said() -> None:
    api, rollback = MemoryApi(), Rollback()
    api.put(R.SECRETS, {"metadata": {"name": "w1", "namespace": NS}, "data": {}})
    await register(api, rollback)
    # meanwhile: someone else rewrites the Secret and puts a ConfigMap in the new namespace
    await api.patch(R.SECRETS, "w1", {"data": {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: "eA=="}}, NS)
    api.put(R.CONFIGMAPS, {"metadata": {"name": "theirs", "namespace": NS}})
    api.put(R.CONFIGMAPS, {"metadata": {"name": "kube-root-ca.crt", "namespace": NS}})

    undone, failed = await rollback.run()

    assert failed == []
    assert f"kept Secret {NS}/w1: changed since by someone else" in undone
    assert f"kept Namespace {NS}: it now holds objects this command did not create" in undone
    assert (R.SECRETS.plural, NS, "w1") in api.objects
    assert (R.NAMESPACES.plural, None, NS) in api.objects


async def test_a_step_that_cannot_be_undone_is_reported() -> None:
    api, rollback = MemoryApi(), Rollback()
    await register(api, rollback)
    api.fail[("delete", R.SECRETS.plural)] = errors.Forbidden(403, "Forbidden", "no delete")
    api.fail[("list", R.SECRETS.plural)] = errors.Forbidden(403, "Forbidden", "no list")

    undone, failed = await rollback.run()

    assert failed == [f"delete Secret {NS}/w1 (no delete)", f"delete Namespace {NS} (no list)"]
    summary = rollback_summary("w1", undone, failed)
    assert summary.startswith(f"could not undo all it changed: delete Secret {NS}/w1 (no delete)")
    assert "kfed cluster remove w1" in summary


async def test_add_refused_for_not_becoming_active_leaves_nothing_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = MemoryApi()
    api.put(R.MULTIKUEUE_CONFIGS, config_obj("workers", ["w0"]))
    before = api.state()

    async def connect(_: Target) -> MemoryApi:
        return api

    monkeypatch.setattr(cluster, "connect_manager", connect)
    file = tmp_path / "w1.kubeconfig"
    file.write_text(worker_kubeconfig())

    with pytest.raises(CliError) as caught:
        await cluster._add(Target(namespace=NS), "w1", str(file), None, "workers", True, 0.0)

    assert caught.value.code == EXIT_FAILED
    message = caught.value.message
    assert message.startswith("w1 is not Active after 0s: no Active condition yet")
    assert (
        "rolled back what it did: took w1 out of MultiKueueConfig workers, deleted "
        f"MultiKueueCluster w1, deleted Secret {NS}/w1, deleted Namespace {NS}"
    ) in message
    assert "--no-wait" in message
    assert api.state() == before


async def test_an_interrupted_add_rolls_back_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = MemoryApi()

    async def connect(_: Target) -> MemoryApi:
        return api

    monkeypatch.setattr(cluster, "connect_manager", connect)
    file = tmp_path / "w1.kubeconfig"
    file.write_text(worker_kubeconfig())
    task = asyncio.create_task(
        cluster._add(Target(namespace=NS), "w1", str(file), None, "workers", True, 60.0)
    )

    await wait_for(
        lambda: (R.MULTIKUEUE_CONFIGS.plural, None, "workers") in api.objects,
        timeout=5,
        what="the registration, before the wait for Active",
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert api.objects == {}
