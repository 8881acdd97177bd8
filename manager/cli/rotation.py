"""``kfed cluster rotate``: a fresh ServiceAccount token for a worker's kubeconfig.

The token in a worker's kubeconfig Secret (on the manager) names the ServiceAccount it was
issued for (its ``sub`` claim). With the current token, or with another kubeconfig of the
worker when that one has run out, a TokenRequest for that ServiceAccount mints the next one;
the Secret is then updated in place (only the token changes), and the manager, which watches
its Secrets, reconnects with it: no restart.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from typing import Any

import yaml

from manager.api.view import at
from manager.cli.common import CliError
from manager.cli.kubeconfigs import connect_dict
from manager.cli.workerobjects import secret_of
from manager.federation.workers import credentials, kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]
MIN_SECONDS = 600
"""The shortest token the API server issues (TokenRequest's expirationSeconds)."""


@dataclass(frozen=True, slots=True)
class Rotated:
    cluster: str
    secret: str
    service_account: tuple[str, str]
    expires: dt.datetime | None


def _user(config: Obj, context: str) -> Obj:
    contexts = {c["name"]: c.get("context") or {} for c in config.get("contexts") or []}
    user_name = contexts.get(context, {}).get("user")
    for entry in config.get("users") or []:
        if entry.get("name") == user_name:
            user: Obj = entry.setdefault("user", {})
            return user
    raise CliError(f"the kubeconfig has no user for context {context!r}")


def service_account_of(token: str | None, given: str | None) -> tuple[str, str]:
    """The ServiceAccount to mint for: ``given`` (NAMESPACE/NAME), else the one the current
    token was issued for."""
    if given:
        namespace, _, name = given.partition("/")
        if not namespace or not name:
            raise CliError(f"--service-account must be NAMESPACE/NAME, not {given!r}")
        return namespace, name
    claims = credentials.jwt_claims(token or "")
    found = credentials.service_account_of(claims) if claims else None
    if found is None:
        raise CliError(
            "the kubeconfig's credentials name no ServiceAccount (not a ServiceAccount token): "
            "give --service-account NAMESPACE/NAME, or rotate a client certificate with the "
            "authority that issued it"
        )
    return found


async def request_token(api: KubeApi, account: tuple[str, str], seconds: int) -> tuple[str, str]:
    """(token, expirationTimestamp) from a TokenRequest."""
    namespace, name = account
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    path = f"{R.SERVICE_ACCOUNTS.path(namespace, name)}/token"
    status = at(await api.request("POST", path, body=body), "status")
    if not status.get("token"):
        raise CliError(
            f"the worker answered the TokenRequest for {namespace}/{name} without a token"
        )
    return str(status["token"]), str(status.get("expirationTimestamp") or "")


async def rotate(
    manager: KubeApi,
    cluster: str,
    *,
    namespace: str,
    seconds: int,
    service_account: str | None = None,
    worker_kubeconfig: str | None = None,
) -> Rotated:
    """Mint the next token for worker ``cluster`` and put it into its Secret."""
    if seconds < MIN_SECONDS:
        raise CliError(f"--duration must be at least {MIN_SECONDS // 60} minutes")
    try:
        mk = await manager.get(R.MULTIKUEUE_CLUSTERS, cluster)
    except errors.NotFound:
        raise CliError(
            f"no worker cluster {cluster!r} (MultiKueueCluster) on the manager"
        ) from None
    secret_name = secret_of(mk)
    if secret_name is None:
        raise CliError(f"worker {cluster} does not read its kubeconfig from a Secret")
    secret = await manager.get(R.SECRETS, secret_name, namespace)
    try:
        checked = kubeconfig.check(kubeconfig.from_secret(secret))
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(f"worker {cluster}'s kubeconfig is refused: {err}") from None
    config = copy.deepcopy(checked.config)
    user = _user(config, checked.context)
    account = service_account_of(user.get("token"), service_account)

    if worker_kubeconfig is not None:  # the current credentials may have run out already
        try:
            reach = kubeconfig.check(worker_kubeconfig)
        except kubeconfig.KubeconfigRejected as err:
            raise CliError(f"--worker-kubeconfig is refused: {err}") from None
    else:
        reach = checked
    async with await connect_dict(reach.config, reach.context, name=cluster) as worker:
        token, _ = await request_token(worker, account, seconds)

    user.pop("client-certificate-data", None)
    user.pop("client-key-data", None)
    user["token"] = token
    text = yaml.safe_dump(config, sort_keys=False)
    kubeconfig.check(text)  # what we write must pass what the manager will check
    patch = {
        "metadata": {"resourceVersion": secret["metadata"]["resourceVersion"]},
        "data": kubeconfig.secret_data(text),
    }
    try:
        await manager.patch(R.SECRETS, secret_name, patch, namespace)
    except errors.Conflict:
        raise CliError(f"Secret {namespace}/{secret_name} changed meanwhile: run again") from None
    expiry = credentials.token_expiry(token)
    return Rotated(cluster, secret_name, account, expiry.at if expiry else None)
