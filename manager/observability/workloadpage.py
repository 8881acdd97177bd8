"""The page of one workload (``/workloads/NS/NAME``): its story from submission to finish,
the dispatch decision with every worker considered, its conditions and admission checks,
and a link to its trace when a trace UI is configured.

The story is told from what the clusters keep: the Workload's creation and conditions, the
Events kfed (and Kueue's controllers, on the same objects) wrote on the Workload and its
Job, and the Job's start and completion times. ``timeline`` is a pure function of those
objects; ``render`` escapes every value it inserts (names and messages come from users).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from manager.api import view
from manager.controllers import workloadstatus as ws
from manager.federation.engine import topologyback
from manager.federation.engine.retaining import ran_on
from manager.federation.engine.workloadview import (
    Placement,
    cluster_of,
    flavors_of,
    placement_of,
    state_of,
    why,
)

Obj = Mapping[str, Any]

STEPS = {
    "QuotaReserved": ("Quota reserved", "info"),
    "Admitted": ("Admitted", "ok"),
    "Dispatched": ("Dispatched", "info"),
    "MultiKueue": ("Admitted on the worker", "ok"),
    "Started": ("Started", "ok"),
    "Failover": ("Failover", "bad"),
    "Pending": ("Waiting", "warn"),
    "Preempted": ("Preempted", "bad"),
    "Stopped": ("Stopped", "warn"),
    "DispatchRejected": ("Rejected", "bad"),
    "AdmissionCheckRejected": ("Rejected", "bad"),
    "FinishedWorkload": ("Finished", "muted"),
}
"""Event reason -> (what the timeline calls it, its colour). Others keep their reason."""
SKIPPED = {"CreatedWorkload"}
"""Said by "Submitted" already."""


@dataclass(frozen=True, slots=True)
class Moment:
    at: float
    """Unix time (whole seconds: what the API keeps)."""
    what: str
    detail: str
    tone: str = "info"
    count: int = 1
    """On the last of repeated Events Kubernetes folded into one: how many in all."""


def parse_time(value: Any) -> float | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def event_times(event: Obj) -> tuple[float | None, float | None]:
    """When an Event first and last happened (Kubernetes folds repeats into one Event with
    a count): ``firstTimestamp``/``lastTimestamp``, else ``eventTime`` (events.k8s.io
    writers) for both."""
    first, last = parse_time(event.get("firstTimestamp")), parse_time(event.get("lastTimestamp"))
    single = parse_time(event.get("eventTime"))
    return first or last or single, last or first or single


def timeline(workload: Obj, job: Obj | None, events: Sequence[Obj]) -> list[Moment]:
    """The workload's story, oldest first."""
    meta, spec = view.at(workload, "metadata"), view.at(workload, "spec")
    moments: list[Moment] = []
    created = parse_time(meta.get("creationTimestamp"))
    if created is not None:
        moments.append(Moment(created, "Submitted", f"queued in {spec.get('queueName') or '?'}"))
    reasons = set()
    for event in events:
        reason = str(event.get("reason") or "")
        first, last = event_times(event)
        if first is None or last is None or reason in SKIPPED:
            continue
        reasons.add(reason)
        what, tone = STEPS.get(
            reason, (reason, "warn" if event.get("type") == "Warning" else "info")
        )
        if reason.startswith("EvictedDueTo"):
            what, tone = "Evicted", "bad"
        message, count = str(event.get("message") or ""), int(event.get("count") or 1)
        moments.append(Moment(first, what, message, tone))
        if count > 1:  # the last time too (the times between are not kept)
            moments.append(Moment(last, what, message, tone, count))
    job_status = view.at(job, "status")
    started = parse_time(job_status.get("startTime"))
    if started is not None:
        # Its first start: a failover keeps the Job's startTime (the timeline says where).
        moments.append(Moment(started, "Running", "the Job started (status.startTime)", "ok"))
    for condition in ws.status_of(workload).get("conditions") or []:
        if condition.get("type") != "Finished" or condition.get("status") != "True":
            continue
        if "FinishedWorkload" in reasons:
            break  # the Event says it already
        at = parse_time(condition.get("lastTransitionTime"))
        if at is not None:
            text = f"{condition.get('reason') or ''}: {condition.get('message') or ''}".strip(": ")
            moments.append(Moment(at, "Finished", text, "muted"))
    return sorted(moments, key=lambda m: m.at)


@dataclass(frozen=True, slots=True)
class WorkloadDetails:
    workload: Obj
    job: Obj | None = None
    events: Sequence[Obj] = field(default_factory=list)
    trace_url: str = ""
    """Its trace in the configured trace UI; "" when none is configured."""


def _when(at: float, start: float) -> tuple[str, str]:
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return stamp, f"+{int(at - start)}s"


def _rows(cells: Sequence[Sequence[str]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells)


def _decision(placement: Placement | None, note: str | None) -> str:
    if placement is None:
        return f'<p class="empty">{escape(note or "no dispatch decision recorded")}</p>'
    items = "".join(f"<li>{escape(c)}</li>" for c in placement.candidates)
    return (
        f"<p>Chose <b>{escape(placement.cluster)}</b> by {escape(placement.rule)}"
        f"{f' at {escape(placement.at)}' if placement.at else ''}: {escape(placement.reason)}</p>"
        f'<p class="note">Every worker considered:</p><ul id="candidates">{items}</ul>'
    )


def render(details: WorkloadDetails) -> str:
    wl = details.workload
    meta, spec, status = view.at(wl, "metadata"), view.at(wl, "spec"), ws.status_of(wl)
    moments = timeline(wl, details.job, details.events)
    start = moments[0].at if moments else 0.0
    story = _rows(
        [
            [
                *(escape(x) for x in _when(m.at, start)),
                f'<span class="badge {m.tone}">{escape(m.what)}</span>'
                + (f" again ({m.count} in all)" if m.count > 1 else ""),
                escape(m.detail),
            ]
            for m in moments
        ]
    )
    placement, note = placement_of(wl)
    checks = _rows(
        [
            [
                escape(str(c.get("name"))),
                escape(str(c.get("state", "Pending"))),
                escape(str(c.get("message") or "")),
            ]
            for c in status.get("admissionChecks") or []
        ]
    )
    conditions = _rows(
        [
            [
                escape(str(c.get(k) or ""))
                for k in ("type", "status", "reason", "message", "lastTransitionTime")
            ]
            for c in status.get("conditions") or []
        ]
    )
    trace = (
        f'<a id="trace" href="{escape(details.trace_url)}">its trace</a>'
        if details.trace_url
        else '<span class="note">no trace UI configured (--trace-url)</span>'
    )
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    facts = _rows(
        [
            ["Job", escape(f"{ws.owner_kind(wl) or '?'} {_job_name(wl, details.job)}")],
            ["State", f'<span class="badge">{escape(state_of(wl))}</span>'],
            ["Why", escape(why(wl, placement=placement))],
            ["Queue", escape(f"{spec.get('queueName') or ''} → {ws.cluster_queue_of(wl) or '—'}")],
            ["Flavors", escape(", ".join(flavors_of(wl)) or "—")],
            ["Cluster", escape(cluster_of(wl) or ran_on(dict(wl)) or "—")],
            *(
                [["Topology", "<br>".join(escape(line) for line in where)]]
                if (where := topologyback.lines(wl))
                else []
            ),
            ["Trace", trace],
        ]
    )
    return PAGE.format(
        title=escape(name),
        facts=facts,
        story=story or '<tr><td colspan="4" class="empty">nothing recorded yet</td></tr>',
        decision=_decision(placement, note),
        checks=checks or '<tr><td colspan="3" class="empty">none</td></tr>',
        conditions=conditions or '<tr><td colspan="5" class="empty">none</td></tr>',
    )


def _job_name(wl: Obj, job: Obj | None) -> str:
    if job is not None:
        return str(view.at(job, "metadata").get("name") or "")
    for ref in view.at(wl, "metadata").get("ownerReferences") or []:
        return str(ref.get("name") or "")
    return ""


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · kfed</title>
<style>
  body {{ font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
         color: #1d2330; background: #f5f6f8; }}
  header {{ background: #1d2330; color: #fff; padding: 10px 20px; }}
  header a {{ color: #c5cad6; }}
  header h1 {{ font-size: 18px; margin: 0; display: inline; }}
  main {{ padding: 12px 20px 40px; max-width: 1200px; }}
  h2 {{ font-size: 15px; margin: 18px 0 6px; }}
  table {{ border-collapse: collapse; width: 100%; background: #fff;
          box-shadow: 0 1px 2px rgba(0,0,0,.08); }}
  th, td {{ text-align: left; padding: 5px 9px; border-bottom: 1px solid #e6e8ec;
           vertical-align: top; }}
  th {{ background: #eceef2; font-weight: 600; white-space: nowrap; }}
  #facts td:first-child {{ font-weight: 600; width: 90px; }}
  #timeline td:nth-child(-n+3) {{ white-space: nowrap; }}
  .badge {{ display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px;
           font-weight: 600; background: #eceef2; }}
  .ok {{ background: #dcf3e3; color: #146c2e; }} .warn {{ background: #fff0c9; color: #7a5200; }}
  .bad {{ background: #fbdcdc; color: #9b1c1c; }} .info {{ background: #e1ebfb; color: #1f4f9b; }}
  .muted {{ background: #eceef2; color: #5b6475; }}
  .empty, .note {{ color: #5b6475; font-style: italic; }}
</style>
</head>
<body>
<header><a href="../../dashboard/">kfed dashboard</a> › <h1>{title}</h1></header>
<main>
<table id="facts">{facts}</table>
<h2>Timeline</h2>
<table id="timeline"><thead><tr><th>When (UTC)</th><th>Since submission</th><th>What</th>
<th>Detail</th></tr></thead><tbody>{story}</tbody></table>
<h2>Dispatch decision</h2>
{decision}
<h2>Admission checks</h2>
<table id="checks"><thead><tr><th>Check</th><th>State</th><th>Message</th></tr></thead>
<tbody>{checks}</tbody></table>
<h2>Conditions</h2>
<table id="conditions"><thead><tr><th>Type</th><th>Status</th><th>Reason</th><th>Message</th>
<th>Since</th></tr></thead><tbody>{conditions}</tbody></table>
</main>
</body>
</html>
"""
