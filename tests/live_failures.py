"""Every failure printed the moment it happens, one line each, not only in the summary at the
end: a run that CI stops at its time limit never reaches that summary, and its log then shows
only which dots turned into ``F``. Under pytest-xdist the line comes from the process that
prints the progress, as a test process's report arrives there."""

from __future__ import annotations

import pytest

REASON_CHARS = 300


def one_line_reason(report: pytest.TestReport) -> str:
    """The failure's first ``E   ...`` line (pytest's error line), else the last line of its
    text, cut to a readable length."""
    lines = [line.strip() for line in report.longreprtext.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    reason = errors[0] if errors else (lines[-1] if lines else "(no text)")
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 3] + "..."


class LiveFailures:
    def __init__(self, reporter: pytest.TerminalReporter) -> None:
        self.reporter = reporter

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        self.reporter.write("\n")  # off the progress line
        self.reporter.write_line(
            f"FAILED {report.nodeid} ({report.when}, {report.duration:.0f} s): "
            f"{one_line_reason(report)}",
            red=True,
        )


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist test process: its output is not shown
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        config.pluginmanager.register(LiveFailures(reporter), "kfed-live-failures")
