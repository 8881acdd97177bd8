"""A drill's report as people read it (``render``) and as scripts read it (``as_json``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.text import Text

from manager.cli.drills.report import EXIT_OK, DrillReport, fmt
from manager.cli.tables import table


def render(report: DrillReport, *, output_path: str | None = None) -> Group:
    """The report as people read it: what was done, the phases (p50/max), one row per probe,
    the double-run count, the restoration and the verdict."""
    n = len(report.probes)
    parts: list[Any] = [
        Text(
            f"kfed drill {report.kind} of {report.cluster} (run {report.run_id}, "
            f"{report.started_at})",
            style="bold",
        ),
        Text(f"  probes:   {n} Job(s) in {report.queue}, flavor {report.flavor}"),
        Text(f"  break:    {report.breaking}"),
        Text(""),
        table(
            ("phase (since the break)", "p50", "max", "probes"),
            ((p.phase, fmt(p.p50), fmt(p.max), f"{p.reached}/{n}") for p in report.phases),
        ),
        Text(""),
        table(
            (
                "probe",
                "moved to",
                "detected",
                "stopped",
                "evicted",
                "re-dispatched",
                "running",
                "gap",
                "double run",
            ),
            (
                (
                    p.probe,
                    p.moved_to or ("resumed there" if p.resumed is not None else "-"),
                    fmt(p.detection),
                    fmt(p.stopped),
                    fmt(p.eviction),
                    fmt(p.redispatch),
                    fmt(p.running_elsewhere),
                    fmt(p.margin),
                    "YES" if p.double_runs else ("unverified" if p.unverified else "no"),
                )
                for p in report.probes
            ),
        ),
        Text(""),
        Text(
            f"double runs: {report.double_run_count} "
            f"({report.samples} samples, every {report.interval:g}s per cluster)",
            style="bold red" if report.double_run_count else "bold",
        ),
        Text(
            f"moved: {report.moved_count} of {n} probe(s) ran elsewhere; resumed: "
            f"{report.resumed_count} ran on {report.cluster} once it was restored"
        ),
    ]
    r = report.restoration
    for action in r.actions:
        parts.append(Text(f"restored: {action}"))
    if r.restored_at is not None:
        parts.append(
            Text(
                f"restored at {fmt(r.restored_at)}; {report.cluster} Active again after "
                f"{fmt(r.active_again_after)}; probe copies gone from it after "
                f"{fmt(r.cleaned_after)}"
            )
        )
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    for problem in report.problems:
        parts.append(Text(f"problem: {problem}", style="red"))
    result = "PASS" if report.exit_code == EXIT_OK else f"FAIL (exit {report.exit_code})"
    written = f"; report written to {output_path}" if output_path else ""
    parts.append(
        Text(
            f"result: {result}{written}", style="bold green" if not report.exit_code else "bold red"
        )
    )
    return Group(*parts)


def as_json(report: DrillReport) -> str:
    """The whole report for scripts; times in seconds since the break, to the millisecond."""
    data = asdict(report)
    data["double_runs"] = report.double_run_count
    data["moved"] = report.moved_count
    data["resumed"] = report.resumed_count
    data["passed"] = report.exit_code == EXIT_OK
    return json.dumps(_milliseconds(data), indent=2) + "\n"


def _milliseconds(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _milliseconds(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_milliseconds(v) for v in value]
    return value
