"""Before a drill breaks anything: the worker it names is registered, Active, and its
kubeconfig Secret is there; a connection to every worker, to watch each one directly."""

from __future__ import annotations

import asyncio
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import annotations_of
from manager.cli.clusterstatus import active_condition, describe_active
from manager.cli.common import EXIT_UNREACHABLE, CliError, usage_error
from manager.cli.drills import leftovers as drillleftovers
from manager.cli.drills import servers as drillservers
from manager.cli.kubeconfigs import connect_dict
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


def secret_name(mk_cluster: Obj) -> str:
    secret = federated.kubeconfig_source(mk_cluster).secret
    if secret is None:
        name = mk_cluster["metadata"]["name"]
        raise usage_error(f"MultiKueueCluster {name} does not keep its kubeconfig in a Secret")
    return secret


async def check_target(api: KubeApi, cluster: str, namespace: str) -> str:
    """The target's Secret name, once the target is fit for a drill: registered, Active, not
    in maintenance, not left broken by another drill."""
    try:
        mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
    except errors.NotFound:
        raise usage_error(
            f"no MultiKueueCluster {cluster} on the manager; see `kfed cluster list`"
        ) from None
    secret = secret_name(mk_cluster)
    left = await drillleftovers.leftover(api, cluster, namespace, secret)
    if left is not None:
        raise CliError(
            f"{left}: is another drill running? If not, put it back with "
            f"`kfed drill restore --cluster {cluster}`"
        )
    mode = annotations_of(mk_cluster).get(C.MAINTENANCE_ANNOTATION)
    if mode:
        raise CliError(
            f"{cluster} is in maintenance ({mode}): a drill needs it serving; "
            f"`kfed cluster uncordon {cluster}` first"
        )
    condition = active_condition(mk_cluster)
    if condition is None or condition.get("status") != "True":
        raise CliError(
            f"{cluster} is not Active ({describe_active(condition)}): a drill needs a healthy "
            "cluster to break; see `kfed cluster list`"
        )
    return secret


async def connect_worker(api: KubeApi, cluster: str, namespace: str) -> KubeApi:
    """A direct connection to a worker with the kubeconfig from its Secret, checked with one
    request."""
    mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
    secret = await api.get(R.SECRETS, secret_name(mk_cluster), namespace)
    try:
        checked = kubeconfig.check(drillservers.secret_kubeconfig(secret))
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(f"worker {cluster}: its kubeconfig is refused: {err}") from None
    worker = await connect_dict(checked.config, checked.context, name=cluster)
    try:
        async with asyncio.timeout(10):
            await worker.request("GET", "/version")
    except (errors.KubeError, TimeoutError) as err:
        await worker.close()
        raise CliError(
            f"cannot read worker {cluster} directly at {checked.server} ({err or 'timed out'}): "
            "the drill watches every worker with the kubeconfig from its Secret to count double "
            "runs; run it from where the workers are reachable",
            EXIT_UNREACHABLE,
        ) from None
    return worker
