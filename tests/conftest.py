from collections import defaultdict

import pytest
from hypothesis import settings

from tests import realtools
from tests.realcluster.fixtures import control_plane  # noqa: F401  (one per session, for every tier)

# Timing belongs in benchmarks: a property test must not fail because CI is busy (e.g. with
# the test host's qemu, which stays up for the whole session).
settings.register_profile("numa-kubelets", deadline=None)
settings.load_profile("numa-kubelets")

# Seconds spent per tier (tests/<tier>/...), setup and teardown included: a booted test host
# counts towards the tier whose test first needed it.
_seconds_per_tier: defaultdict[str, float] = defaultdict(float)


@pytest.hookimpl(trylast=True)  # after pytest's own grouping by fixture scope, which this keeps
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that need no built program first, then the `realtools` ones in the order
    tools/build.sh builds their families: under tests/run.sh the build runs beside them."""

    def rank(item: pytest.Item) -> int:
        marker = item.get_closest_marker("realtools")
        if marker is None:
            return 0
        if len(marker.args) != 1 or marker.args[0] not in realtools.BUILD_ORDER:
            raise pytest.UsageError(
                f"{item.nodeid}: realtools takes one family of {realtools.BUILD_ORDER}, not {marker.args}"
            )
        return 1 + realtools.BUILD_ORDER.index(marker.args[0])

    items.sort(key=rank)  # stable: a module's tests stay together and in file order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    parts = report.nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    _seconds_per_tier[tier] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _seconds_per_tier:
        return
    if realtools.WAITED:
        terminalreporter.write_sep("-", "time the tests waited for tools/build.sh (beside them)")
        for name, seconds in realtools.WAITED.items():
            terminalreporter.write_line(f"{name:<32} {seconds:8.1f} s")
    terminalreporter.write_sep("-", "time per tier")
    for tier, seconds in sorted(_seconds_per_tier.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{tier:<12} {seconds:8.1f} s")
