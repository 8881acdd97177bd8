"""Workers registered by a ClusterProfile: the pure reading of the profile and the
platform's access providers (clusterprofiles.py), and the plugin run (execplugin.py)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from manager.api import clusterprofile
from manager.api import constants as C
from manager.configfile import ConfigError, defaults_from
from manager.federation.accessproviders import EXEC_API_VERSIONS, Provider, parse_providers
from manager.federation.settings import FederationSettings, providers
from manager.federation.workers import clusterprofiles as cps
from manager.federation.workers import execplugin, kubeconfig
from manager.federation.workers.profilesource import DRAIN_MARK, ProfileSource
from manager.federation.workers.remote import RemoteCluster
from manager.kube.api import KubeApi

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n").decode()
TOKEN_PLUGIN = Provider(name="token", command="/bin/true")
OTHER = Provider(name="other", command="/bin/true")


def profile(*entries: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """A ClusterProfile with (status key, provider name, cluster) entries."""
    status: dict[str, list[dict[str, Any]]] = {}
    for key, name, cluster in entries:
        status.setdefault(key, []).append({"name": name, "cluster": cluster})
    return {"metadata": {"name": "cloud-1", "namespace": "kueue-system"}, "status": status}


def endpoint(server: str = "https://10.0.0.1:6443", **more: object) -> dict[str, Any]:
    return {"server": server, "certificate-authority-data": CA, **more}


def test_the_first_configured_provider_the_profile_lists_is_used() -> None:
    found = cps.access_of(
        profile(
            ("accessProviders", "token", endpoint()),
            ("accessProviders", "other", endpoint("https://other:6443")),
        ),
        (OTHER, TOKEN_PLUGIN),
    )
    assert found.provider is OTHER  # the configuration's order, as upstream's library
    found = cps.access_of(profile(("accessProviders", "token", endpoint())), (OTHER, TOKEN_PLUGIN))
    assert (found.provider, found.server) == (TOKEN_PLUGIN, "https://10.0.0.1:6443")


def test_access_providers_win_over_the_deprecated_credential_providers() -> None:
    found = cps.access_of(
        profile(
            ("credentialProviders", "token", endpoint("https://old:6443")),
            ("accessProviders", "token", endpoint("https://new:6443")),
        ),
        (TOKEN_PLUGIN,),
    )
    assert found.server == "https://new:6443"
    only_old = profile(("credentialProviders", "token", endpoint("https://old:6443")))
    assert cps.access_of(only_old, (TOKEN_PLUGIN,)).server == "https://old:6443"


@pytest.mark.parametrize(
    ("the_profile", "configured", "reason", "says"),
    [
        (profile(("accessProviders", "gke", endpoint())), (TOKEN_PLUGIN,),
         cps.REASON_NO_ACCESS_PROVIDER, "it lists: gke; configured: token"),
        (profile(), (TOKEN_PLUGIN,), cps.REASON_NO_ACCESS_PROVIDER, "it lists: none"),
        (profile(("accessProviders", "token", endpoint())), (),
         cps.REASON_NO_ACCESS_PROVIDER, "no ClusterProfile access providers configured"),
        (profile(("accessProviders", "token", {})), (TOKEN_PLUGIN,),
         cps.REASON_BAD_PROFILE, "gives no cluster server"),
    ],
)  # fmt: skip
def test_a_profile_that_cannot_be_used_says_why(
    the_profile: dict[str, Any], configured: tuple[Provider, ...], reason: str, says: str
) -> None:
    with pytest.raises(cps.ProfileProblem) as err:
        cps.access_of(the_profile, configured)
    assert err.value.reason == reason
    assert says in str(err.value)


@pytest.mark.parametrize(
    ("cluster", "says"),
    [
        (endpoint("http://10.0.0.1:6443"), "is not https"),
        ({**endpoint(), "insecure-skip-tls-verify": True}, "insecure-skip-tls-verify"),
        ({**endpoint(), "proxy-url": "http://proxy:3128"}, "proxy-url"),
        (endpoint("https://admin:pw@10.0.0.1"), "carries credentials"),
    ],
)
def test_the_endpoint_obeys_the_kubeconfig_rules(cluster: dict[str, Any], says: str) -> None:
    access = cps.access_of(profile(("accessProviders", "token", cluster)), (TOKEN_PLUGIN,))
    with pytest.raises(cps.ProfileProblem) as err:
        cps.check_endpoint("cloud-1", access)
    assert err.value.reason == cps.REASON_BAD_PROFILE
    assert says in str(err.value)
    assert "pw" not in str(err.value)


def test_the_plugin_gets_the_cluster_and_its_exec_extension_only_when_it_asks() -> None:
    cluster = endpoint(
        extensions=[{"name": clusterprofile.EXEC_EXTENSION, "extension": {"audience": "kfed"}}]
    )
    asks = Provider(name="token", command="x", provide_cluster_info=True)
    info = cps.exec_info(cps.Access(asks, cluster))
    assert info["spec"]["cluster"] == {
        "server": "https://10.0.0.1:6443",
        "certificate-authority-data": CA,
        "config": {"audience": "kfed"},
    }
    assert info["kind"] == "ExecCredential" and info["spec"]["interactive"] is False
    assert "cluster" not in cps.exec_info(cps.Access(TOKEN_PLUGIN, cluster))["spec"]


def credential(status: dict[str, Any], api_version: str = EXEC_API_VERSIONS[0]) -> bytes:
    return json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "status": status}
    ).encode()


def test_a_token_with_its_expiry_is_read_and_refreshed_before_it_runs_out() -> None:
    read = cps.parse_credential(
        credential({"token": "abc", "expirationTimestamp": "2030-01-01T01:00:00Z"}),
        EXEC_API_VERSIONS[0],
    )
    assert read.token == "abc" and read.expires == dt.datetime(2030, 1, 1, 1, tzinfo=dt.UTC)
    fetched = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    one_hour = cps.Credential(token="abc", expires=read.expires, fetched=fetched)
    assert one_hour.refresh_at() == dt.datetime(2030, 1, 1, 0, 48, tzinfo=dt.UTC)
    assert cps.Credential(token="abc").refresh_at() is None


@pytest.mark.parametrize(
    ("output", "says"),
    [
        (b"not json", "is not JSON"),
        (credential({"token": "a"}, "client.authentication.k8s.io/v1beta1"), "has apiVersion"),
        (credential({}), "neither a token nor a client certificate"),
        (credential({"clientCertificateData": "PEM"}), "without its key"),
        (credential({"token": "a", "expirationTimestamp": "soon"}), "not RFC 3339"),
    ],
)
def test_bad_plugin_output_is_credentials_failed(output: bytes, says: str) -> None:
    with pytest.raises(cps.ProfileProblem) as err:
        cps.parse_credential(output, EXEC_API_VERSIONS[0])
    assert err.value.reason == cps.REASON_CREDENTIALS_FAILED
    assert says in str(err.value)


def test_the_kubeconfig_made_from_a_profile_passes_the_secret_rules() -> None:
    access = cps.access_of(profile(("accessProviders", "token", endpoint())), (TOKEN_PLUGIN,))
    for cred in (cps.Credential(token="t"), cps.Credential(certificate="C", key="K")):
        checked = kubeconfig.check(cps.kubeconfig_text("cloud-1", access, cred))
        assert checked.server == "https://10.0.0.1:6443"
        (user,) = checked.config["users"]
        assert "exec" not in user["user"]


def test_providers_come_from_kueues_configuration_and_the_flag() -> None:
    config = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
multiKueue:
  clusterProfile:
    accessProviders:
    - name: token
      execConfig: {apiVersion: client.authentication.k8s.io/v1, command: /opt/plugin,
                   args: [--audience, kfed], env: [{name: A, value: b}],
                   provideClusterInfo: true}
"""
    loaded = defaults_from(config)
    text = loaded.defaults["cluster_profile_providers"]
    (read,) = providers(text)
    assert read == Provider(
        name="token",
        command="/opt/plugin",
        args=("--audience", "kfed"),
        env=(("A", "b"),),
        provide_cluster_info=True,
    )
    assert not loaded.warnings
    assert FederationSettings().cluster_profile_providers == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[{"name": "a"}]', "needs a name and a command"),
        ('[{"name": "a", "execConfig": {"command": "x", "apiVersion": "v9"}}]', "apiVersion"),
        (
            '[{"name": "a", "execConfig": {"command": "x"}}, '
            '{"name": "a", "execConfig": {"command": "y"}}]',
            "a name repeats",
        ),
    ],
)
def test_bad_providers_are_refused_at_start(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_providers(text)


def test_the_clusterprofile_crd_is_generated_from_the_models() -> None:
    crd = clusterprofile.crd()
    assert crd["metadata"]["name"] == "clusterprofiles.multicluster.x-k8s.io"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    cluster = status["accessProviders"]["items"]["properties"]["cluster"]["properties"]
    assert {"server", "certificate-authority-data", "extensions"} <= set(cluster)


# -- running the plugin ----------------------------------------------------------------------


def plugin(tmp_path: Path, body: str) -> Provider:
    script = tmp_path / "plugin.py"
    script.write_text(body)
    return Provider(name="token", command=sys.executable, args=(str(script),))


async def test_the_plugin_is_run_with_the_exec_info_and_its_env(tmp_path: Path) -> None:
    body = """
import json, os
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {"token": os.environ["GIVEN"] + "-" + info["kind"]}}))
"""
    provider = plugin(tmp_path, body)
    provider = Provider(
        name=provider.name, command=provider.command, args=provider.args, env=(("GIVEN", "t"),)
    )
    got = await execplugin.fetch(cps.Access(provider, endpoint()), timeout=30)
    assert got.token == "t-ExecCredential"


@pytest.mark.parametrize(
    ("body", "timeout", "says"),
    [
        ("import sys; sys.stderr.write('denied by IAM'); sys.exit(3)", 60, "exited with 3: denied"),
        ("import time; time.sleep(60)", 0.5, "did not answer in 0.5s"),
    ],
)
async def test_a_failing_plugin_is_credentials_failed(
    tmp_path: Path, body: str, timeout: float, says: str
) -> None:
    with pytest.raises(cps.ProfileProblem) as err:
        await execplugin.fetch(cps.Access(plugin(tmp_path, body), endpoint()), timeout=timeout)
    assert err.value.reason == cps.REASON_CREDENTIALS_FAILED
    assert says in str(err.value)


async def test_a_plugin_that_cannot_start_is_credentials_failed() -> None:
    missing = Provider(name="token", command="/nonexistent/plugin")
    with pytest.raises(cps.ProfileProblem, match="cannot start"):
        await execplugin.fetch(cps.Access(missing, endpoint()), timeout=5)


@pytest.mark.parametrize(("value", "warned"), [(True, False), (False, True)])
def test_upstreams_gate_is_taken_and_kfed_reads_profiles_regardless(
    value: bool, warned: bool
) -> None:
    config = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        f"featureGates: {{MultiKueueClusterProfile: {str(value).lower()}}}\n"
    )
    warnings = defaults_from(config).warnings
    assert any("MultiKueueClusterProfile" in w for w in warnings) == warned


def test_the_example_registers_a_worker_kfed_can_reach() -> None:
    """examples/clusterprofile: the configuration gives a provider the profile lists, and the
    MultiKueueCluster names the profile."""
    from e2e import examples
    from manager.api import parse_object
    from manager.api.clusterprofile import ClusterProfile

    here = examples.EXAMPLES / "clusterprofile"
    loaded = defaults_from((here / "00-manager-config.yaml").read_text())
    configured = providers(str(loaded.defaults["cluster_profile_providers"]))
    the_profile = yaml.safe_load((here / "01-clusterprofile.yaml").read_text())
    ClusterProfile.model_validate(the_profile)
    access = cps.access_of(the_profile, configured)
    cps.check_endpoint("cloud-1", access)
    mk = yaml.safe_load((here / "02-multikueue-cluster.yaml").read_text())
    parse_object(mk)
    assert (
        mk["spec"]["clusterSource"]["clusterProfileRef"]["name"] == the_profile["metadata"]["name"]
    )


def test_the_deprecated_provider_list_is_taken_but_never_with_the_new_one() -> None:
    head = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    entry = "[{name: a, execConfig: {command: /x}}]"
    old = defaults_from(head + f"multiKueue: {{clusterProfile: {{credentialsProviders: {entry}}}}}")
    assert providers(str(old.defaults["cluster_profile_providers"]))[0].name == "a"
    both = f"{{accessProviders: {entry}, credentialsProviders: {entry}}}"
    with pytest.raises(ConfigError, match="mutually exclusive"):
        defaults_from(head + f"multiKueue: {{clusterProfile: {both}}}")


# -- a deleted ClusterProfile: drain, then let go (profilesource.py) -------------------------


class _Api:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch(self, _res: object, _name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(body)
        return body


class _Remote:
    connected, synced = True, True

    def __init__(self, workloads: list[dict[str, Any]]) -> None:
        self._workloads = workloads

    def workloads(self) -> _Remote:
        return self

    def items(self) -> list[dict[str, Any]]:
        return self._workloads


MK = {
    "metadata": {"name": "cloud-1"},
    "spec": {"clusterSource": {"clusterProfileRef": {"name": "cloud-1"}}},
}


def _source(now: list[float]) -> tuple[ProfileSource, _Api]:
    api = _Api()
    settings = FederationSettings(cluster_profile_drain_timeout=10.0)
    source = ProfileSource(cast(KubeApi, api), settings, lambda: None, lambda: now[0])
    source.served = True
    source.informer.synced.set()
    return source, api


async def test_a_worker_whose_profile_is_deleted_drains_then_is_let_go_at_the_timeout() -> None:
    now = [100.0]
    source, api = _source(now)
    running = _Remote([{"metadata": {"name": "wl"}, "status": {"conditions": []}}])
    remote = cast(RemoteCluster, running)
    assert (await source.resolve("cloud-1", MK, remote)).hold
    assert api.patches == [
        {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: "drain", DRAIN_MARK: ""}}}
    ]
    assert "draining" in source.note("cloud-1")
    now[0] = 109.0
    assert (await source.resolve("cloud-1", MK, remote)).hold
    now[0] = 111.0
    let_go = await source.resolve("cloud-1", MK, remote)
    assert let_go.problem is not None and let_go.problem[0] == cps.REASON_PROFILE_DELETED
    assert "1 workloads still there after 11s" in let_go.problem[1]
    assert (await source.resolve("cloud-1", MK, None)).problem == let_go.problem  # stable
    assert source.note("cloud-1") == ""


async def test_a_finished_workload_does_not_hold_the_drain_and_an_unknown_worker_is_not_found() -> (
    None
):
    now = [0.0]
    source, _ = _source(now)
    done = {"status": {"conditions": [{"type": C.FINISHED, "status": "True"}]}}
    drained = await source.resolve("cloud-1", MK, cast(RemoteCluster, _Remote([done])))
    assert drained.problem is not None and "drained in 0.0s" in drained.problem[1]
    other = {**MK, "metadata": {"name": "cloud-2"}}
    gone = await source.resolve("cloud-2", other, None)
    assert gone.problem == (
        cps.REASON_PROFILE_NOT_FOUND,
        "ClusterProfile kueue-system/cloud-1 not found",
    )
