"""TAS: where a federated workload's pods went, in lines for people (``kfed explain``, the
workload page): from the manager Workload's ``kfed.io/topology`` annotation, which the
manager writes from the worker's assignment with every level named (block, rack, host)."""

from __future__ import annotations

import json
from typing import Any

from manager.federation.decisions.topology import short
from manager.federation.engine.topologyback import ANNOTATION

SHOWN = 8
"""Domains shown per pod set; the rest are counted."""


def lines(workload: dict[str, Any]) -> list[str]:
    text = ((workload.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not text:
        return []
    try:
        placed = json.loads(text)
        pod_sets = dict(placed["podSets"])
    except (ValueError, KeyError, TypeError):
        return [f"unreadable {ANNOTATION} annotation"]
    levels = " / ".join(short(str(level)) for level in placed.get("levels") or [])
    result = [f"on {placed.get('cluster', '?')} ({levels})"] if levels else []
    for name, domains in sorted(pod_sets.items()):
        shown = [f"{' / '.join(values)} x{count}" for values, count in domains[:SHOWN]]
        more = len(domains) - len(shown)
        result.append(f"{name}: {', '.join(shown)}" + (f" and {more} more" if more > 0 else ""))
    return result
