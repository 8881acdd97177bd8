"""Full mode: controller-manager, scheduler and kwok make a plain Job really run and complete
on a fake GPU node of the right model."""

from __future__ import annotations

import pytest

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.kube import resources as R
from manager.kube.api import KubeApi

pytestmark = pytest.mark.full


async def test_h100_job_completes_on_an_h100_node(
    full_federation: LocalFederation, unique: str
) -> None:
    nodes = full_federation.kubectl("worker-2", "get", "nodes", "-L", "gpu.model").stdout
    assert "h100" in nodes and "rtx-a1000" not in nodes
    async with await KubeApi.from_kubeconfig_file(full_federation.kubeconfig("worker-2")) as api:
        ns = f"gpu-{unique}"
        await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "probe", "namespace": ns},
            "spec": {
                "template": {
                    "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "500"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {"gpu.model": "h100"},
                        "containers": [
                            {
                                "name": "cuda",
                                "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
                                "resources": {
                                    "requests": {
                                        "cpu": "8",
                                        "memory": "32Gi",
                                        "nvidia.com/gpu": "1",
                                    },
                                    "limits": {"nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                    },
                }
            },
        }
        await api.create(R.JOBS, job)

        async def complete() -> bool:
            status = (await api.get(R.JOBS, "probe", ns)).get("status", {})
            return any(
                c["type"] == "Complete" and c["status"] == "True"
                for c in status.get("conditions", [])
            )

        await wait_for(complete, timeout=60, what="Job Complete")
        pods = (await api.list(R.PODS, ns))["items"]
        assert len(pods) == 1
        node = await api.get(R.NODES, pods[0]["spec"]["nodeName"])
        assert node["metadata"]["labels"]["gpu.model"] == "h100"
        assert pods[0]["status"]["phase"] == "Succeeded"
