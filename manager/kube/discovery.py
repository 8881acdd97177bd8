"""Whether the API server serves a resource (its CRD installed and established)."""

from __future__ import annotations

from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.resources import Resource


async def serves(api: KubeApi, resource: Resource) -> bool:
    """True when ``resource`` is listed in its group version's discovery document."""
    path = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    try:
        document = await api.request("GET", path)
    except errors.NotFound:
        return False
    return any(r.get("name") == resource.plural for r in document.get("resources") or [])
