"""ClusterProfile, the cluster inventory API's view of one cluster
(``multicluster.x-k8s.io/v1alpha1``, sigs.k8s.io/cluster-inventory-api), as far as kfed
reads it: a MultiKueueCluster may name one (``spec.clusterSource.clusterProfileRef``) in
the manager's namespace instead of a kubeconfig Secret.

The cluster inventory (the platform's tool: OCM, a cloud's fleet manager...) owns these
objects and installs their CRD; kfed only reads them. ``crd()`` is a CRD for the fields
kfed reads, for a manager cluster without an inventory tool (tests, a trial): it keeps
unknown fields, so an inventory's richer objects are stored as written.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from manager.api.crdgen import crd as crd_of
from manager.api.meta import KubeModel, KubeObject, PrinterColumn, ResourceInfo
from manager.api.schema import K8s, model_extra

GROUP = "multicluster.x-k8s.io"
VERSION = "v1alpha1"
ACCESS_PROVIDERS = "accessProviders"
CREDENTIAL_PROVIDERS = "credentialProviders"
"""The deprecated name of ``accessProviders`` in a ClusterProfile's status: read too, and
the entry of ``accessProviders`` wins when both name the same provider."""
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
"""The cluster extension whose value is handed to the credentials plugin as
``spec.cluster.config`` (``provideClusterInfo``)."""


class ClusterManager(KubeModel):
    """The tool that manages the cluster."""

    name: str
    """Its name."""


class ClusterProfileSpec(KubeModel):
    """Who manages the cluster."""

    display_name: str | None = None
    """A name for people."""
    cluster_manager: ClusterManager
    """The tool that manages the cluster."""


class NamedExtension(KubeModel):
    """An extension of a cluster entry, as in a kubeconfig."""

    name: str
    """Its name (``client.authentication.k8s.io/exec``: the plugin's configuration)."""
    extension: Annotated[dict[str, Any], K8s(preserve_unknown_fields=True)] = Field(
        default_factory=dict
    )
    """Its value, any object."""


class ClusterEndpoint(KubeModel):
    """How to reach the cluster's API server: a kubeconfig's cluster entry."""

    model_config = ConfigDict(populate_by_name=True)

    server: str
    """The API server's https URL."""
    certificate_authority_data: str | None = Field(default=None, alias="certificate-authority-data")
    """The CA that signs the server's certificate (base64 PEM)."""
    tls_server_name: str | None = Field(default=None, alias="tls-server-name")
    """The name to check the server's certificate against."""
    insecure_skip_tls_verify: bool | None = Field(default=None, alias="insecure-skip-tls-verify")
    """Refused by kfed."""
    proxy_url: str | None = Field(default=None, alias="proxy-url")
    """Refused by kfed."""
    extensions: list[NamedExtension] = Field(default_factory=list)
    """Extensions (the credentials plugin's configuration, say)."""


class AccessProvider(KubeModel):
    """One way to reach the cluster: an access provider's name and the endpoint it serves."""

    name: str
    """The provider's name, matched against the manager's configured providers."""
    cluster: ClusterEndpoint | None = None
    """The cluster's endpoint for this provider."""


class ClusterProfileStatus(KubeModel):
    """What the inventory knows of the cluster."""

    model_config = ConfigDict(json_schema_extra=model_extra(preserve_unknown_fields=True))

    access_providers: Annotated[
        list[AccessProvider], K8s(list_type="map", list_map_keys=("name",))
    ] = Field(default_factory=list)
    """How the cluster can be reached, one entry per access provider."""
    credential_providers: Annotated[
        list[AccessProvider], K8s(list_type="map", list_map_keys=("name",))
    ] = Field(default_factory=list)
    """Deprecated name of ``accessProviders``."""


class ClusterProfile(KubeObject):
    """One cluster of the inventory."""

    model_config = ConfigDict(json_schema_extra=model_extra(preserve_unknown_fields=True))

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="ClusterProfile",
        plural="clusterprofiles",
        singular="clusterprofile",
        scope="Namespaced",
        short_names=("cp",),
        printer_columns=(
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
    )

    api_version: Literal["multicluster.x-k8s.io/v1alpha1"] = "multicluster.x-k8s.io/v1alpha1"
    kind: Literal["ClusterProfile"] = "ClusterProfile"
    spec: ClusterProfileSpec
    status: ClusterProfileStatus | None = None


def crd() -> dict[str, Any]:
    """A CustomResourceDefinition of ClusterProfile for a manager cluster that has none."""
    body = crd_of(ClusterProfile)
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["apiVersion"]["description"] = f"{GROUP}/{VERSION}"
    return body
