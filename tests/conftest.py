from collections import defaultdict

import pytest
from hypothesis import settings

from tests.realcluster.fixtures import control_plane  # noqa: F401  (one per session, for every tier)

# Timing belongs in benchmarks: a property test must not fail because CI is busy (e.g. with
# the test host's qemu, which stays up for the whole session).
settings.register_profile("numa-kubelets", deadline=None)
settings.load_profile("numa-kubelets")

# Seconds spent per tier (tests/<tier>/...), setup and teardown included: a booted test host
# counts towards the tier whose test first needed it.
_seconds_per_tier: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    parts = report.nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    _seconds_per_tier[tier] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _seconds_per_tier:
        return
    terminalreporter.write_sep("-", "time per tier")
    for tier, seconds in sorted(_seconds_per_tier.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{tier:<12} {seconds:8.1f} s")
