"""Any manifest written for upstream Kueue applies to kfed unchanged, whatever fields it uses:
for every field path of every kind in upstream's CRDs (v1beta2, at the pinned upstream
version), a generated document that sets it (``fieldcorpus.py``) is sent, as a server-side
dry run with strict field validation (kubectl's default), to a cluster with upstream's CRDs
and webhooks (worker-2, upstream Kueue running) and to one with kfed's (the manager).
Every document upstream accepts, kfed must accept too. Status fields are sent the same way,
as a merge patch of the status subresource of an object of each kind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from e2e.local import upstream_kueue
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.interop import fieldcorpus
from tests.integration.interop.conftest import KFED_MANAGER, KUEUE_MANAGER, InteropClusters

pytestmark = pytest.mark.full
NAMESPACE = "default"
STRICT_DRY_RUN = {"dryRun": "All", "fieldValidation": "Strict"}
CONCURRENCY = 8


def upstream_kinds() -> list[tuple[R.Resource, dict[str, Any]]]:
    """(resource, v1beta2 openAPIV3Schema) of every kind in upstream's CRDs."""
    kinds = []
    for path in sorted(upstream_kueue.crd_directory().glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        (version,) = [v for v in spec["versions"] if v["name"] == "v1beta2"]
        resource = R.Resource(
            spec["group"], "v1beta2", spec["names"]["plural"], spec["names"]["kind"],
            spec["scope"] == "Namespaced",
        )  # fmt: skip
        kinds.append((resource, version["schema"]["openAPIV3Schema"]))
    return kinds


def body(res: R.Resource, name: str, document: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": NAMESPACE} if res.namespaced else {})}
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": metadata, **document}


async def refusal(call: Callable[[], Awaitable[Any]]) -> str | None:
    """None when the request is accepted; else the API server's message."""
    try:
        await call()
    except (errors.BadRequest, errors.Invalid, errors.Forbidden) as err:
        return str(err)
    return None


@dataclass
class Comparison:
    upstream: KubeApi
    kfed: KubeApi
    gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CONCURRENCY))
    cases: int = 0
    upstream_accepts: int = 0
    no_value_made: int = 0
    refused_by_kfed: dict[str, str] = field(default_factory=dict)

    async def one(self, label: str, send: Callable[[KubeApi], Awaitable[Any]]) -> None:
        async with self.gate:
            if await refusal(lambda: send(self.upstream)) is not None:
                return
            self.upstream_accepts += 1
            if (why := await refusal(lambda: send(self.kfed))) is not None:
                self.refused_by_kfed[label] = why

    async def kind(self, res: R.Resource, schema: dict[str, Any]) -> None:
        base = fieldcorpus.BASES[res.kind]
        ns = NAMESPACE if res.namespaced else None
        creates: list[fieldcorpus.Case] = []
        for under in ("spec", ""):
            made, skipped = fieldcorpus.cases(schema, under=under, base=base)
            creates += made
            self.no_value_made += len(skipped)
        statuses, skipped = fieldcorpus.cases(schema, under="status")
        self.no_value_made += len(skipped)
        self.cases += len(creates) + len(statuses)

        def create(case: fieldcorpus.Case) -> Callable[[KubeApi], Awaitable[Any]]:
            obj = body(res, "corpus", case.document)
            return lambda api: api.request("POST", res.path(ns), query=STRICT_DRY_RUN, body=obj)

        await asyncio.gather(*(self.one(f"{res.kind}{c.name}", create(c)) for c in creates))
        if not statuses:
            return
        holder = f"corpus-status-{res.plural}"

        def patch(case: fieldcorpus.Case) -> Callable[[KubeApi], Awaitable[Any]]:
            return lambda api: api.request(
                "PATCH",
                res.path(ns, holder, "status"),
                query=STRICT_DRY_RUN,
                body={"status": case.document["status"]},
                content_type="application/merge-patch+json",
            )

        for api in (self.upstream, self.kfed):
            await api.create(res, body(res, holder, base), ns)
        try:
            await asyncio.gather(*(self.one(f"{res.kind}{c.name}", patch(c)) for c in statuses))
        finally:
            for api in (self.upstream, self.kfed):
                await api.delete(res, holder, ns)


async def test_every_field_upstream_accepts_kfed_accepts(interop: InteropClusters) -> None:
    fed = interop.fed
    upstream = await KubeApi.from_kubeconfig_file(fed.kubeconfig(KUEUE_MANAGER), name="upstream")
    kfed = await KubeApi.from_kubeconfig_file(fed.kubeconfig(KFED_MANAGER), name="kfed")
    comparison = Comparison(upstream, kfed)
    try:
        for res, schema in upstream_kinds():
            await comparison.kind(res, schema)
    finally:
        await upstream.close()
        await kfed.close()
    refused = comparison.refused_by_kfed
    print(
        f"field corpus: {comparison.cases} documents, {comparison.upstream_accepts} accepted by "
        f"upstream, {len(refused)} of those refused by kfed; no value made for "
        f"{comparison.no_value_made} paths"
    )
    assert comparison.upstream_accepts > 0.8 * comparison.cases
    assert refused == {}, "\n".join(f"{k}: {v}" for k, v in sorted(refused.items()))
