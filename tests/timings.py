"""Figures a test run prints at its end: how long the emulated hosts' steps took (`Stopwatch`),
and how long the tests waited for tools/build.sh (tests/realtools.py WAITED).

Under `make test` the tests run in two pytest-xdist workers, and the process that prints the
summary (xdist's controller) never sees a worker's module globals. So each test's figures ride
on its last report (`user_properties`), and the summary is made from the reports alone: the
same path with or without workers.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from tests import realtools

# Steps timed in this process since its last report, as (label, seconds).
TIMINGS: list[tuple[str, float]] = []

_TIMING = "numa-kubelets-timing"
_WAITED = "numa-kubelets-waited"


class Stopwatch:
    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self) -> Stopwatch:
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        TIMINGS.append((self.label, time.monotonic() - self.started))


def attach_to(report: pytest.TestReport) -> None:
    """Moves what this process timed and waited since the last report onto this one."""
    report.user_properties.extend((_TIMING, timing) for timing in TIMINGS)
    report.user_properties.extend((_WAITED, (name, seconds)) for name, seconds in realtools.WAITED.items())
    TIMINGS.clear()
    realtools.WAITED.clear()


class Summary:
    """What the reports carried, in the order they arrived."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self.waited: defaultdict[str, float] = defaultdict(float)

    def collect(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == _TIMING:
                self.timings.append((value[0], value[1]))
            elif key == _WAITED:
                self.waited[value[0]] += value[1]

    def write(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.waited:
            terminalreporter.write_sep("-", "time the tests waited for tools/build.sh (beside them)")
            for name, seconds in self.waited.items():
                terminalreporter.write_line(f"{name:<32} {seconds:8.1f} s")
        if self.timings:
            terminalreporter.write_sep("-", "test host timings")
            for label, seconds in self.timings:
                terminalreporter.write_line(f"{label:<60} {seconds:7.1f} s")
