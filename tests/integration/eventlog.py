"""Reading back the Kubernetes Events kfed wrote, as ``kubectl get events`` and ``kubectl
describe`` show them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from e2e.waiting import WaitTimeout, wait_for
from manager.kube import resources as R
from manager.kube.api import KubeApi


@dataclass(frozen=True, slots=True)
class Told:
    type: str
    reason: str
    message: str
    count: int
    component: str


def _order(event: dict[str, Any]) -> int:
    """Events about one object are named ``<object>.<hex nanoseconds>`` by the process that
    wrote them (client-go's scheme): the suffix orders them finer than their timestamps."""
    suffix = event["metadata"]["name"].rsplit(".", 1)[-1]
    try:
        return int(suffix, 16)
    except ValueError:
        return 0


async def events_about(
    api: KubeApi, namespace: str, kind: str, name: str, *, component: str | None = None
) -> list[Told]:
    """The Events about one object, oldest first (only ``component``'s, when given: the
    controller-manager tells its own part of a Job's story)."""
    items = (
        await api.list(
            R.EVENTS,
            namespace,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
        )
    )["items"]
    told = [
        Told(
            e.get("type", ""),
            e.get("reason", ""),
            e.get("message", ""),
            int(e.get("count") or 1),
            (e.get("source") or {}).get("component", ""),
        )
        for e in sorted(items, key=_order)
    ]
    return [t for t in told if component is None or t.component == component]


def reasons(told: list[Told]) -> list[str]:
    return [t.reason for t in told]


def in_order(seen: list[str], expected: list[str]) -> bool:
    """``expected`` appears in ``seen`` in this order (other reasons may come between)."""
    position = 0
    for reason in seen:
        if position < len(expected) and reason == expected[position]:
            position += 1
    return position == len(expected)


async def wait_for_story(
    api: KubeApi,
    namespace: str,
    kind: str,
    name: str,
    expected: list[str],
    *,
    timeout: float = 30,
    where: str = "",
    component: str | None = None,
) -> list[Told]:
    """Wait until the object's Events show ``expected`` in order (they are written in the
    background, a moment after the step they tell)."""

    seen: list[Told] = []

    async def story() -> list[Told]:
        seen[:] = await events_about(api, namespace, kind, name, component=component)
        return list(seen) if in_order(reasons(seen), expected) else []

    try:
        return await wait_for(story, timeout=timeout, what=f"{kind} {namespace}/{name}{where}")
    except WaitTimeout as err:
        raise WaitTimeout(f"{err}: expected {expected}, saw {seen}") from None


def described_reasons(describe_output: str) -> list[str]:
    """The Reason column of the Events table at the end of ``kubectl describe``."""
    lines = describe_output.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Events:"))
    except StopIteration:
        return []
    found = []
    for line in lines[start + 1 :]:
        fields = line.split()
        if len(fields) >= 2 and fields[0] in ("Normal", "Warning"):
            found.append(fields[1])
    return found
