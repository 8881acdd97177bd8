"""ClusterProfiles for tests: the CRD kfed generates (installed without network), a
ClusterProfile with its access providers in status, and a credentials plugin of the test's
own that prints the credential a file holds (a worker's client certificate)."""

from __future__ import annotations

import base64
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from e2e.waiting import wait_for
from manager.api import clusterprofile
from manager.federation.accessproviders import Provider
from manager.kube import discovery, errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

PROVIDER = "kfed-test"

PLUGIN = """
import json, os, sys
path = os.environ["KFED_TEST_CREDENTIAL"]
try:
    with open(path) as f:
        status = json.load(f)
except OSError:
    sys.stderr.write("no credential issued for this cluster")
    sys.exit(1)
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
with open(path + ".asked", "a") as f:  # the server each run was asked for
    f.write(info["spec"].get("cluster", {}).get("server", "") + "\\n")
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
"""


async def install_crd(api: KubeApi) -> None:
    """kfed's ClusterProfile CRD (manager/api/clusterprofile.py), served before it returns."""
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(R.CRDS, clusterprofile.crd())
    await wait_for(
        lambda: discovery.serves(api, R.CLUSTER_PROFILES),
        timeout=60,
        what="ClusterProfiles served",
    )


class Plugin:
    """The test's credentials plugin: it prints the credential in ``credential`` (none, and
    it fails), and notes the server each run was given."""

    def __init__(self, directory: Path) -> None:
        self.script = directory / "kfed-test-plugin.py"
        self.script.write_text(PLUGIN)
        self.credential = directory / "credential.json"

    @property
    def provider(self) -> Provider:
        return Provider(
            name=PROVIDER,
            command=sys.executable,
            args=(str(self.script),),
            env=(("KFED_TEST_CREDENTIAL", str(self.credential)),),
            provide_cluster_info=True,
        )

    def issue(self, kubeconfig: Path) -> None:
        """Hand out the client certificate of ``kubeconfig``'s user."""
        user = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]
        status = {
            "clientCertificateData": base64.b64decode(user["client-certificate-data"]).decode(),
            "clientKeyData": base64.b64decode(user["client-key-data"]).decode(),
        }
        self.credential.write_text(json.dumps(status))

    def issue_token(self, token: str) -> None:
        self.credential.write_text(json.dumps({"token": token}))

    def revoke(self) -> None:
        self.credential.unlink(missing_ok=True)

    def servers_asked(self) -> list[str]:
        asked = Path(str(self.credential) + ".asked")
        return asked.read_text().split() if asked.exists() else []


def endpoint_of(kubeconfig: Path, server: str | None = None) -> dict[str, Any]:
    cluster: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    return {
        "server": server or cluster["server"],
        "certificate-authority-data": cluster["certificate-authority-data"],
    }


async def put_profile(
    api: KubeApi, namespace: str, name: str, providers: dict[str, dict[str, Any]]
) -> None:
    """Create (or update) ClusterProfile ``name`` listing ``providers`` (name -> cluster)."""
    body = {
        "apiVersion": R.CLUSTER_PROFILES.api_version,
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterManager": {"name": "kfed-test-inventory"}},
    }
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(R.CLUSTER_PROFILES, body, namespace)
    status = {"accessProviders": [{"name": n, "cluster": c} for n, c in providers.items()]}
    await api.patch(R.CLUSTER_PROFILES, name, {"status": status}, namespace, subresource="status")


def profile_source(name: str) -> dict[str, Any]:
    return {"kubeConfig": None, "clusterProfileRef": {"name": name}}
