"""Where a charge reads DeviceClasses and ResourceSlices (``dra.DeviceCatalogue``): a
DeviceClass may serve a container's extended resource (``nvidia.com/gpu``), and a
partition's charge is the counters its devices consume (docs/dra.md).

A cluster alone reads its own, once per Workload that needs them; kfed's manager reads its
workers' too (``federation/runtime.py`` installs that source): the devices are there, not on
the manager."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from manager.api import dra
from manager.api.view import at
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj

log = logging.getLogger(__name__)

CatalogueSource = Callable[[bool], Awaitable[dra.DeviceCatalogue]]
"""Given whether ResourceSlices are wanted (DeviceClasses always are), the catalogue."""


async def of_cluster(api: KubeApi, slices: bool) -> dra.DeviceCatalogue:
    """The cluster's own DeviceClasses (and ResourceSlices when ``slices``), listed now; none
    when it does not serve ``resource.k8s.io/v1`` (404) or may not list them (the log says
    so). One LIST (two with slices) per Workload that needs them: a job asking for an extended
    resource, or claiming devices under a counter mapping."""
    try:
        classes = (await api.list(R.DEVICE_CLASSES))["items"]
        found = (await api.list(R.RESOURCE_SLICES))["items"] if slices else []
    except errors.NotFound:
        return dra.DeviceCatalogue()
    except errors.Forbidden as err:
        log.warning("cannot read DeviceClasses or ResourceSlices here: %s", err)
        return dra.DeviceCatalogue()
    return dra.DeviceCatalogue({c["metadata"]["name"]: c for c in classes}, found)


def merged(parts: Iterable[tuple[str, dra.DeviceCatalogue]]) -> dra.DeviceCatalogue:
    """One catalogue of several clusters' (name, catalogue): a DeviceClass known by one name
    in several is taken from the first; each slice's pool is renamed ``<cluster>/<pool>``,
    so that two clusters' same-named pools stay two pools."""
    classes: dict[str, Obj] = {}
    slices: list[Obj] = []
    for cluster, catalogue in parts:
        for name, device_class in catalogue.classes.items():
            classes.setdefault(name, device_class)
        for s in catalogue.slices:
            spec = at(s, "spec")
            pool = dict(spec.get("pool") or {})
            pool["name"] = f"{cluster}/{pool.get('name', '')}"
            slices.append({**s, "spec": {**spec, "pool": pool}})
    return dra.DeviceCatalogue(classes, slices)
