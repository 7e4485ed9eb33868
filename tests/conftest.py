from collections import defaultdict

import pytest
from hypothesis import settings

from tests import realtools, timings
from tests.realcluster.fixtures import control_plane  # noqa: F401  (one per session, for every tier)

# Timing belongs in benchmarks: a property test must not fail because CI is busy (e.g. with
# the test host's qemu, which stays up for the whole session).
settings.register_profile("numa-kubelets", deadline=None)
settings.load_profile("numa-kubelets")

# Seconds spent per tier (tests/<tier>/...), setup and teardown included: a booted test host
# counts towards the tier whose test first needed it.
_seconds_per_tier: defaultdict[str, float] = defaultdict(float)
_figures = timings.Summary()

# `make test` runs two pytest-xdist workers (tests/run.sh: --dist loadgroup): every test that
# uses the session's origin machine goes to one of them, in order, and every other module goes
# whole to whichever worker is free, so each module's fixtures (a booted machine, a deployed
# stack) are made once. The two chains overlap what one leaves idle: a guest waiting on its
# kubelets, an engine waiting on a guest.
ORIGIN_MACHINE_GROUP = "origin-machine"


def xdist_group(item: pytest.Item) -> str:
    """The work unit a test belongs to: the origin machine's, or its module's."""
    if "numa_host" in getattr(item, "fixturenames", ()):
        return ORIGIN_MACHINE_GROUP
    return item.nodeid.split("::", 1)[0]


def pytest_itemcollected(item: pytest.Item) -> None:
    """Marks each test's group as it is collected: before xdist's pytest_collection_modifyitems,
    which appends it to the test's id for its scheduler."""
    item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown":
        timings.attach_to(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _figures.collect(report)
    parts = report.nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    _seconds_per_tier[tier] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _figures.write(terminalreporter)
    if not _seconds_per_tier:
        return
    terminalreporter.write_sep("-", "time per tier")
    for tier, seconds in sorted(_seconds_per_tier.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{tier:<12} {seconds:8.1f} s")
