"""Registering worker clusters on the manager, the MultiKueue way (``clusterstatus`` reads
them back).

A worker is three objects on the manager: a Secret (key ``kubeconfig``) in kfed's namespace,
a MultiKueueCluster pointing at it, and an entry in a MultiKueueConfig that an AdmissionCheck
(``controllerName: kueue.x-k8s.io/multikueue``) references. The kfed manager connects to
registered workers and reports each one's ``Active`` condition; cordon and drain are the
``kfed.io/maintenance`` annotation on the MultiKueueCluster. The objects themselves (the
Secret, the MultiKueueCluster) and the checks before writing them are workerobjects.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import at, items, labels_of
from manager.cli.common import CliError
from manager.cli.rollback import Rollback
from manager.cli.workerobjects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    check_name,
    kubeconfig_secret,
    multikueue_cluster,
    secret_of,
)
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]

DEFAULT_CONFIG = "workers"
_CONFLICT_ATTEMPTS = 5


# -- add -----------------------------------------------------------------------------------


_BUILT_IN = {
    R.CONFIGMAPS.plural: {"kube-root-ca.crt"},
    R.SERVICE_ACCOUNTS.plural: {"default"},
}


async def _namespace_holds_others(api: KubeApi, namespace: str) -> bool:
    """Whether a namespace holds anything beyond what Kubernetes puts in every namespace."""
    for res in (R.SECRETS, R.CONFIGMAPS, R.SERVICE_ACCOUNTS, R.PODS, R.LEASES):
        built_in = _BUILT_IN.get(res.plural, set())
        for obj in (await api.list(res, namespace))["items"]:
            if obj["metadata"]["name"] not in built_in:
                return True
    return False


async def _ensure_namespace(api: KubeApi, namespace: str, rollback: Rollback) -> list[str]:
    try:
        await api.get(R.NAMESPACES, namespace)
        return []
    except errors.NotFound:
        pass
    try:
        created = await api.create(R.NAMESPACES, {"metadata": {"name": namespace}})
    except errors.AlreadyExists:
        return []
    uid = created["metadata"].get("uid")

    async def undo() -> str:
        if await _namespace_holds_others(api, namespace):
            return f"kept Namespace {namespace}: it now holds objects this command did not create"
        await api.delete(R.NAMESPACES, namespace, uid=uid)
        return f"deleted Namespace {namespace}"

    rollback.add(f"delete Namespace {namespace}", undo)
    return [f"created Namespace {namespace}"]


def _secret_fields(obj: Obj) -> tuple[str | None, str | None]:
    """What a registration sets on a Secret: its managed-by label and its kubeconfig."""
    labels = labels_of(obj)
    data = at(obj, "data")
    return labels.get(MANAGED_BY_LABEL), data.get(C.MULTIKUEUE_KUBECONFIG_SECRET_KEY)


async def _upsert_secret(api: KubeApi, body: Obj, rollback: Rollback) -> str:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    where = f"Secret {namespace}/{name}"
    try:
        created = await api.create(R.SECRETS, body, namespace)
    except errors.AlreadyExists:
        pass
    else:
        uid = created["metadata"].get("uid")

        async def delete() -> str:
            await api.delete(R.SECRETS, name, namespace, uid=uid)
            return f"deleted {where}"

        rollback.add(f"delete {where}", delete)
        return f"created {where}"
    before = _secret_fields(await api.get(R.SECRETS, name, namespace))
    ours = _secret_fields(body)
    await api.patch(
        R.SECRETS, name, {"metadata": {"labels": meta["labels"]}, "data": body["data"]}, namespace
    )
    if before == ours:
        return f"{where} unchanged"

    async def restore() -> str:
        current = await api.get(R.SECRETS, name, namespace)
        if _secret_fields(current) != ours:
            return f"kept {where}: changed since by someone else"
        label, data = before
        await api.patch(
            R.SECRETS,
            name,
            {
                "metadata": {
                    "labels": {MANAGED_BY_LABEL: label},
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
                "data": {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: data},
            },
            namespace,
        )
        return f"restored {where} as it was"

    rollback.add(f"restore {where}", restore)
    return f"updated {where}"


async def _upsert_cluster(api: KubeApi, name: str, secret: str, rollback: Rollback) -> str:
    body = multikueue_cluster(name, secret)
    try:
        created = await api.create(R.MULTIKUEUE_CLUSTERS, body)
    except errors.AlreadyExists:
        pass
    else:
        uid = created["metadata"].get("uid")

        async def delete() -> str:
            await api.delete(R.MULTIKUEUE_CLUSTERS, name, uid=uid)
            return f"deleted MultiKueueCluster {name}"

        rollback.add(f"delete MultiKueueCluster {name}", delete)
        return f"created MultiKueueCluster {name}"
    existing = await api.get(R.MULTIKUEUE_CLUSTERS, name)
    before = at(existing, "spec").get("clusterSource")
    ours = body["spec"]["clusterSource"]
    if before == ours:
        return f"MultiKueueCluster {name} unchanged"
    await api.patch(
        R.MULTIKUEUE_CLUSTERS,
        name,
        {"spec": {"clusterSource": {**ours, "clusterProfileRef": None}}},
    )

    async def restore() -> str:
        for _ in range(_CONFLICT_ATTEMPTS):
            current = await api.get(R.MULTIKUEUE_CLUSTERS, name)
            if at(current, "spec").get("clusterSource") != ours:
                return f"kept MultiKueueCluster {name}: changed since by someone else"
            spec = current.setdefault("spec", {})
            if before is None:
                spec.pop("clusterSource", None)
            else:
                spec["clusterSource"] = before
            try:
                await api.replace(R.MULTIKUEUE_CLUSTERS, current)
            except errors.Conflict:  # the manager wrote its status meanwhile
                continue
            return f"restored MultiKueueCluster {name} as it was"
        raise CliError(f"MultiKueueCluster {name} kept changing")

    rollback.add(f"restore MultiKueueCluster {name}", restore)
    return f"updated MultiKueueCluster {name}"


async def _edit_config(
    api: KubeApi, config: str, edit: Callable[[list[str]], list[str]], *, create: bool
) -> tuple[str, list[str]] | None:
    """Apply ``edit`` to a MultiKueueConfig's cluster list with optimistic concurrency.
    Returns (what happened, the new list), or None when the config is missing and not created;
    an empty list deletes the config (the API requires at least one cluster)."""
    for _ in range(_CONFLICT_ATTEMPTS):
        try:
            obj = await api.get(R.MULTIKUEUE_CONFIGS, config)
        except errors.NotFound:
            if not create:
                return None
            clusters = edit([])
            try:
                await api.create(
                    R.MULTIKUEUE_CONFIGS,
                    {
                        "apiVersion": C.API_VERSION,
                        "kind": "MultiKueueConfig",
                        "metadata": {"name": config},
                        "spec": {"clusters": clusters},
                    },
                )
            except errors.AlreadyExists:
                continue
            return f"created MultiKueueConfig {config} with {', '.join(clusters)}", clusters
        before = [str(c) for c in items(obj, "spec", "clusters")]
        after = edit(before)
        if after == before:
            return f"MultiKueueConfig {config} unchanged", after
        try:
            if not after:
                await api.delete(R.MULTIKUEUE_CONFIGS, config, uid=at(obj, "metadata").get("uid"))
                return f"deleted MultiKueueConfig {config} (it listed no other cluster)", after
            obj.setdefault("spec", {})["clusters"] = after
            await api.replace(R.MULTIKUEUE_CONFIGS, obj)
        except errors.Conflict:
            continue
        return f"MultiKueueConfig {config}: {', '.join(after)}", after
    raise CliError(
        f"MultiKueueConfig {config} kept changing under us ({_CONFLICT_ATTEMPTS} conflicts); retry"
    )


async def _join_config(api: KubeApi, config: str, name: str, rollback: Rollback) -> str:
    """List ``name`` in ``config`` (created when missing)."""
    edited = await _edit_config(
        api, config, lambda names: names if name in names else [*names, name], create=True
    )
    assert edited is not None
    line = edited[0]
    if line.endswith(" unchanged"):
        return line

    async def leave() -> str:
        left = await _edit_config(
            api, config, lambda names: [n for n in names if n != name], create=False
        )
        if left is None or left[0].endswith(" unchanged"):
            return f"MultiKueueConfig {config} no longer lists {name}"
        if not left[1]:
            return f"deleted MultiKueueConfig {config}"
        return f"took {name} out of MultiKueueConfig {config}"

    rollback.add(f"take {name} out of MultiKueueConfig {config}", leave)
    return line


async def referencing_checks(api: KubeApi, config: str) -> list[str]:
    """AdmissionChecks whose MultiKueue parameters name this MultiKueueConfig."""
    found = []
    for ac in (await api.list(R.ADMISSION_CHECKS))["items"]:
        if federated.is_multikueue_check(ac) and federated.config_name(ac) == config:
            found.append(str(ac["metadata"]["name"]))
    return found


async def register(
    api: KubeApi,
    name: str,
    checked: kubeconfig.CheckedKubeconfig,
    *,
    namespace: str,
    config: str = DEFAULT_CONFIG,
    rollback: Rollback | None = None,
) -> list[str]:
    """Create or update the Secret and MultiKueueCluster ``name`` and list it in ``config``.
    Returns what was done, one line per object, plus a note when no AdmissionCheck uses the
    config (so no ClusterQueue could dispatch to it yet). Each change is recorded in
    ``rollback`` as it is made, so that a caller can undo it, also after a failure midway."""
    check_name(name)
    rollback = rollback if rollback is not None else Rollback()
    done = await _ensure_namespace(api, namespace, rollback)
    done.append(await _upsert_secret(api, kubeconfig_secret(name, namespace, checked), rollback))
    done.append(await _upsert_cluster(api, name, name, rollback))
    done.append(await _join_config(api, config, name, rollback))
    if not await referencing_checks(api, config):
        done.append(
            f"note: no AdmissionCheck with controllerName {C.MULTIKUEUE_CONTROLLER_NAME} "
            f"references MultiKueueConfig {config} yet; ClusterQueues dispatch only through one"
        )
    return done


# -- remove ----------------------------------------------------------------------------------


async def unregister(api: KubeApi, name: str, *, namespace: str) -> list[str]:
    """Take ``name`` out of every MultiKueueConfig, delete its MultiKueueCluster and its Secret
    (unless another MultiKueueCluster uses the same Secret)."""
    done: list[str] = []
    try:
        mk_cluster: Obj | None = await api.get(R.MULTIKUEUE_CLUSTERS, name)
    except errors.NotFound:
        mk_cluster = None
    for config in (await api.list(R.MULTIKUEUE_CONFIGS))["items"]:
        config_name = str(config["metadata"]["name"])
        if name in items(config, "spec", "clusters"):
            edited = await _edit_config(
                api, config_name, lambda names: [n for n in names if n != name], create=False
            )
            if edited is not None:
                done.append(edited[0])
                if not edited[1] and (checks := await referencing_checks(api, config_name)):
                    done.append(
                        f"note: AdmissionCheck(s) {', '.join(checks)} referenced it and are "
                        "now inactive"
                    )
    secret = secret_of(mk_cluster) if mk_cluster is not None else None
    if mk_cluster is not None and await api.delete(R.MULTIKUEUE_CLUSTERS, name):
        done.append(f"deleted MultiKueueCluster {name}")
    if secret is None and mk_cluster is None:
        # No MultiKueueCluster: only delete a Secret of that name that kfed created.
        try:
            obj = await api.get(R.SECRETS, name, namespace)
            if labels_of(obj).get(MANAGED_BY_LABEL) == MANAGED_BY:
                secret = name
        except errors.NotFound:
            pass
    if secret is not None:
        others = [
            str(c["metadata"]["name"])
            for c in (await api.list(R.MULTIKUEUE_CLUSTERS))["items"]
            if secret_of(c) == secret and c["metadata"]["name"] != name
        ]
        if others:
            done.append(f"kept Secret {namespace}/{secret}: also used by {', '.join(others)}")
        elif await api.delete(R.SECRETS, secret, namespace):
            done.append(f"deleted Secret {namespace}/{secret}")
    if not done:
        raise CliError(
            f"no worker cluster {name} on the manager (no MultiKueueCluster, Secret or "
            "MultiKueueConfig entry); see `kfed cluster list`"
        )
    return done


# -- maintenance -----------------------------------------------------------------------------


async def set_maintenance(api: KubeApi, name: str, mode: str | None) -> Obj:
    """Set (``cordon``/``drain``) or remove (None) the maintenance annotation."""
    try:
        return await api.patch(
            R.MULTIKUEUE_CLUSTERS,
            name,
            {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: mode}}},
        )
    except errors.NotFound:
        raise CliError(
            f"no MultiKueueCluster {name} on the manager; see `kfed cluster list`"
        ) from None
