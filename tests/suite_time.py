"""Where the suite's time goes: after the slowest tests (``--durations``), the time of every
test package and of every bed group (tests/conftest.py: ``bed_group``), summed over setup,
call and teardown in whichever test process ran them. Printed at the end of every run, CI's
included, so a package that grows shows before the suite outgrows CI's limit."""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

import pytest

BED_PROPERTY = "bed"
SHOWN = 12

_by_package: defaultdict[str, float] = defaultdict(float)
_by_bed: defaultdict[str, float] = defaultdict(float)


def package_of(nodeid: str) -> str:
    """``tests/integration/cli/test_x.py::test_y`` -> ``tests/integration/cli``."""
    return str(PurePosixPath(nodeid.split("::", 1)[0]).parent)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The group travels with the test's reports (xdist sends user properties to the
    # process that prints); the marker itself does not.
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        if marker is not None and marker.args:
            item.user_properties.append((BED_PROPERTY, marker.args[0]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _by_package[package_of(report.nodeid)] += report.duration
    bed = dict(report.user_properties).get(BED_PROPERTY)
    if bed is not None:
        _by_bed[str(bed)] += report.duration


def _table(title: str, spent: dict[str, float]) -> list[str]:
    total = sum(spent.values())
    lines = [f"{title} (of {total:.0f} s in all test processes)"]
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1])[:SHOWN]:
        lines.append(f"{seconds:8.1f} s  {seconds / total:5.1%}  {name}")
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _by_package:
        return
    terminalreporter.section("time by package and by bed")
    for line in [*_table("by package", _by_package), "", *_table("by bed group", _by_bed)]:
        terminalreporter.write_line(line)
